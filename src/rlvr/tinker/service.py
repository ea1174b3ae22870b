"""What `rlvr serve --tinker` holds and does: sessions, training clients' models, sampling clients' snapshots, and
the futures of their work, run one at a time in the order it arrived (a training client's calls are ordered; the
SDK submits the next after the last was accepted).

    submit (create_model, forward_backward, optim_step, save/load, asample) ─▶ {"request_id"} at once
    retrieve_future ─▶ the result (JSON, or protobuf for forward_backward and asample), an error, or "try again"

Checkpoints live under `root` as `tinker://<model_id>/<weights|sampler_weights>/<name>` says, and outlive the
server: a later one loads them.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as Pending
from pathlib import Path
from typing import Any

from rlvr.errors import UserError, first_line
from rlvr.models.loading import load_model
from rlvr.samplers.local import CopySampler
from rlvr.tinker.sampling import Request, Snapshot
from rlvr.tinker.training import TrainedModel, saved_model, tokens_problem
from rlvr.tinker.wire import PROTOBUF, Pass, WireError, forward_backward_output

Answer = tuple[Any, str]  # (a JSON value, or protobuf bytes; its content type)
KINDS = ("weights", "sampler_weights")


class Service:
    """The server's state; every method that changes a model or samples runs on the one worker thread."""

    def __init__(self, root: Path, cache_dir: str = "~/.cache/rlvr", aliases: dict[str, str] | None = None) -> None:
        """`aliases`: base model names a client may ask for, each served as the model rlvr loads instead (a recipe
        that knows only Hub names, on a local model)."""
        self.root, self.cache_dir, self.aliases = root, cache_dir, dict(aliases or {})
        self.names: dict[str, str] = {}  # each training client's base model as its client named it
        self.models: dict[str, TrainedModel] = {}
        self.samplers: dict[str, Snapshot] = {}
        self.futures: dict[str, Future[Answer]] = {}
        self.waiting: list[tuple[Snapshot, Request, Future[Answer]]] = []  # sampling requests not yet decoded
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlvr-tinker")
        self._sessions = itertools.count()
        self._sequences = itertools.count()
        self._lock = threading.Lock()

    # ── futures ──────────────────────────────────────────────────────────────────────────────
    def submit(self, work: Callable[[], Answer], **extra: Any) -> dict[str, Any]:
        request_id = uuid.uuid4().hex
        with self._lock:
            self.futures[request_id] = self.worker.submit(work)
        return {"request_id": request_id, **extra}

    def retrieve(self, body: dict[str, Any], wait_s: float) -> Answer:
        """A future's result; "try again" while it runs past `wait_s`; `{"error", "category"}` when it failed."""
        request_id = str(body.get("request_id"))
        with self._lock:
            future = self.futures.get(request_id)
        if future is None:
            return {"error": f"no request {request_id!r} on this server (it forgets nothing it ran: was the server "
                             "restarted?)", "category": "user"}, "json"
        try:
            answer = future.result(timeout=wait_s)
        except Pending:
            return {"type": "try_again", "request_id": request_id, "queue_state": "active"}, "json"
        except (WireError, UserError) as e:
            return {"error": str(e), "category": "user"}, "json"
        except Exception as e:  # (rlvr's own failure: said as the server's)
            return {"error": f"rlvr's tinker server failed: {type(e).__name__}: {first_line(e)}",
                    "category": "server"}, "json"
        return answer

    # ── sessions and models ──────────────────────────────────────────────────────────────────
    def create_session(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"type": "create_session", "session_id": f"session-{next(self._sessions)}-{uuid.uuid4().hex[:6]}"}

    def create_model(self, body: dict[str, Any]) -> dict[str, Any]:
        model_id = f"{required(body, 'session_id', 'create_model')}:train:{whole(body, 'model_seq_id', 'create_model')}"
        lora = body.get("lora_config") or {}
        base = body.get("base_model")
        if not isinstance(base, str) or not base:
            raise WireError("create_model needs base_model: a model rlvr loads (tiny, smollm2, a folder, a Hub name)")
        if not isinstance(lora, dict) or not (_is_whole(lora.get("rank", 32)) and lora.get("rank", 32) >= 1):
            raise WireError(f"create_model: lora_config={lora!r}: give its rank as a whole number, 1 or more")

        def create() -> Answer:
            self.names[model_id] = base
            self.models[model_id] = TrainedModel(
                self.aliases.get(base, base), int(lora.get("rank", 32)), seed=int(lora.get("seed") or 0),
                train_attn=bool(lora.get("train_attn", True)), train_mlp=bool(lora.get("train_mlp", True)),
                cache_dir=self.cache_dir)
            return {"model_id": model_id, "type": "create_model"}, "json"

        return self.submit(create, model_id=model_id)

    def get_info(self, body: dict[str, Any]) -> dict[str, Any]:
        model = self.model(body)
        name = self.names.get(body["model_id"], model.base)
        return {"type": "get_info", "model_id": body["model_id"], "model_name": name, "is_lora": True,
                "lora_rank": model.rank, "model_data": {"model_name": name, "arch": type(model.model).__name__,
                                                        "tokenizer_id": str(self.tokenizer_folder(model))}}

    def model(self, body: dict[str, Any]) -> TrainedModel:
        model_id = body.get("model_id")
        if model_id not in self.models:
            raise WireError(f"no training client {model_id!r} on this server: create it first")
        return self.models[model_id]

    def tokenizer_folder(self, model: TrainedModel) -> Path:
        """A folder the SDK's AutoTokenizer.from_pretrained reads without the Hub (get_info's tokenizer_id)."""
        folder = self.root / "tokenizers" / "".join(c if c.isalnum() or c in "-_." else "_" for c in model.base)
        if not (folder / "tokenizer_config.json").is_file():
            model.tokenizer.save_pretrained(folder)
        return folder

    # ── training ─────────────────────────────────────────────────────────────────────────────
    def forward_backward(self, work: Pass) -> dict[str, Any]:
        model = self.model({"model_id": work.model_id})

        def run() -> Answer:
            logprobs, metrics = model.forward(work)
            return forward_backward_output(logprobs, metrics, work.loss_fn), PROTOBUF

        return self.submit(run)

    def optim_step(self, body: dict[str, Any]) -> dict[str, Any]:
        model = self.model(body)
        adam = body.get("adam_params") or {}
        if body.get("optimizer_params") is not None:
            raise WireError("only AdamW is served (adam_params): not optimizer_params")
        if not isinstance(adam, dict):
            raise WireError(f"adam_params={adam!r}: give an object of AdamW's settings")
        for name, value in adam.items():
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                    and value >= 0):
                raise WireError(f"adam_params.{name}={value!r}: give a finite number, 0 or more")
        return self.submit(lambda: ({"metrics": model.optim_step(adam)}, "json"))

    def save_weights(self, body: dict[str, Any], kind: str) -> dict[str, Any]:
        """save_state (kind "weights": adapters and optimizer), save_weights_for_sampler ("sampler_weights"), or,
        without a name, a sampling client on the weights as they are now."""
        model, model_id = self.model(body), str(body["model_id"])
        name = body.get("path")
        if name is None and kind == "sampler_weights":
            sampler_id = f"{model_id}:sample:{int(body.get('sampling_session_seq_id') or next(self._sequences))}"

            def snapshot() -> Answer:
                self.samplers[sampler_id] = Snapshot(model.snapshot(), model.base, None)
                return {"sampling_session_id": sampler_id, "type": "save_weights_for_sampler"}, "json"

            return self.submit(snapshot)
        path = f"tinker://{model_id}/{kind}/{_name(name)}"

        def save() -> Answer:
            model.save(self.folder(path), optimizer=kind == "weights")
            return {"path": path, "type": "save_weights" if kind == "weights" else "save_weights_for_sampler"}, "json"

        return self.submit(save)

    def load_weights(self, body: dict[str, Any]) -> dict[str, Any]:
        """load_state(_with_optimizer) into a training client, or a new training client from a checkpoint."""
        path, optimizer = str(body.get("path")), bool(body.get("optimizer"))
        folder = self.folder(path)
        if not folder.is_dir():
            raise WireError(f"no checkpoint {path} on this server (its checkpoints are under {self.root})")
        model_id = body.get("model_id") or (f"{required(body, 'session_id', 'load_weights')}:train:"
                                            f"{whole(body, 'model_seq_id', 'load_weights')}")

        def load() -> Answer:
            if model_id not in self.models:
                self.models[model_id] = saved_model(folder, self.cache_dir)
            self.models[model_id].load(folder, optimizer)
            return {"path": path, "model_id": model_id, "type": "load_weights"}, "json"

        return self.submit(load, model_id=model_id)

    def folder(self, path: str) -> Path:
        """Where a tinker:// checkpoint path lives under the server's root."""
        parts = path.removeprefix("tinker://").split("/") if path.startswith("tinker://") else []
        if len(parts) != 3 or parts[1] not in KINDS or not all(p and p not in (".", "..") for p in parts):
            raise WireError(f"{path!r} is not a checkpoint path: tinker://<model_id>/<weights|sampler_weights>/<name>")
        return self.root / parts[0] / parts[1] / parts[2]

    # ── sampling ─────────────────────────────────────────────────────────────────────────────
    def create_sampling_session(self, body: dict[str, Any]) -> dict[str, Any]:
        sampler_id = (f"{required(body, 'session_id', 'create_sampling_session')}:sample:"
                      f"{int(body.get('sampling_session_seq_id') or 0)}")
        path, base = body.get("model_path"), body.get("base_model")
        if path and not self.folder(path).is_dir():
            raise WireError(f"no checkpoint {path} on this server (its checkpoints are under {self.root})")

        def create() -> Snapshot:
            if path:
                model = saved_model(self.folder(path), self.cache_dir)
                model.load(self.folder(path), optimizer=False)
                return Snapshot(model.snapshot(), model.base, path)
            if not base:
                raise WireError("create_sampling_session needs model_path (a tinker:// checkpoint) or base_model")
            network, tokenizer = load_model(self.aliases.get(base, base), self.cache_dir)
            copy = CopySampler(network, tokenizer, contextlib.nullcontext)
            return Snapshot(lambda: copy, base, None)

        self.samplers[sampler_id] = self.worker.submit(create).result()
        return {"type": "create_sampling_session", "sampling_session_id": sampler_id}

    def sampler(self, sampler_id: str) -> dict[str, Any]:
        snapshot = self.snapshot(sampler_id)
        return {"sampler_id": sampler_id, "base_model": snapshot.base, "model_path": snapshot.model_path}

    def snapshot(self, sampler_id: Any) -> Snapshot:
        if sampler_id not in self.samplers:
            raise WireError(f"no sampling client {sampler_id!r} on this server")
        return self.samplers[sampler_id]

    def asample(self, body: dict[str, Any]) -> dict[str, Any]:
        """A sampling request, decoded with every other one waiting when the worker reaches them (an RL loop sends a
        batch's prompts at once): each draw depends on its own seed alone, so what is drawn is the same."""
        snapshot = self.snapshot(body.get("sampling_session_id"))
        request, future = snapshot.request(body), Future[Answer]()
        request_id = uuid.uuid4().hex
        with self._lock:
            self.futures[request_id] = future
            self.waiting.append((snapshot, request, future))
        self.worker.submit(self.sample_waiting)
        return {"request_id": request_id, "sample_sequence_ids": [uuid.uuid4().hex for _ in request.jobs]}

    def sample_waiting(self) -> None:
        """Every sampling request waiting, one decoding per sampling client and setting."""
        with self._lock:
            waiting, self.waiting = self.waiting, []
        groups: dict[tuple[int, Any], list[tuple[Snapshot, Request, Future[Answer]]]] = {}
        for item in waiting:
            groups.setdefault((id(item[0]), item[1].params), []).append(item)
        for group in groups.values():
            snapshot = group[0][0]
            group = [item for item in group if _fits(snapshot, *item[1:])]  # (the others told, as user mistakes)
            if not group:
                continue
            try:
                drawn = snapshot.sampler.complete([job for _, r, _ in group for job in r.jobs], group[0][1].params)
                for _, request, future in group:
                    part, drawn = drawn[:len(request.jobs)], drawn[len(request.jobs):]
                    future.set_result((snapshot.answer(request, part), PROTOBUF))
            except Exception as e:  # (said by retrieve_future, as a failed future's)
                for _, _, future in group:
                    if not future.done():
                        future.set_exception(e)


def _fits(snapshot: Snapshot, request: Request, future: Future[Answer]) -> bool:
    """Whether `request`'s prompt fits the sampling client's model; else its future fails, a user's mistake."""
    model: Any = snapshot.sampler.model
    config = model.config
    problem = tokens_problem(request.jobs[0].ids, int(config.vocab_size),
                             getattr(config, "max_position_embeddings", None), room=1)
    if problem:
        future.set_exception(WireError(f"the prompt: {problem}"))
    return problem is None


def required(body: dict[str, Any], name: str, route: str) -> Any:
    """The field `name` of a request to `route`; a WireError naming it when it is missing."""
    if body.get(name) is None:
        raise WireError(f"{route} needs {name} (the tinker SDK sends it: is this a tinker client?)")
    return body[name]


def whole(body: dict[str, Any], name: str, route: str) -> int:
    """The field `name` as a whole number; a WireError naming it when it is missing or another kind."""
    value = required(body, name, route)
    if not _is_whole(value):
        raise WireError(f"{route}: {name}={value!r}: give a whole number")
    return int(value)


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _name(name: Any) -> str:
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise WireError(f"checkpoint name {name!r}: give a name without '/'")
    return name
