"""A scripted model that answers right some of the time, so rejection sampling has something to keep."""

import json
import math
from types import SimpleNamespace

import pytest
import torch

from rlvr.models import build_tiny_tokenizer

EOS = "<|im_end|>"
# next character -> weight; the chat prompt ends with "\n". Completions are, with these probabilities:
#   [spaces] \boxed{3}  /  [spaces] \boxed{3.0}  /  [spaces] \boxed{4}  /  n7   (spaces: 0, 1, 2, ... with halving odds)
SCRIPT = {
    "\n": {"\\": 2, " ": 1, "=": 1},
    " ": {" ": 1, "\\": 1},
    "\\": {"b": 1}, "b": {"o": 1}, "o": {"x": 1}, "x": {"e": 1}, "e": {"d": 1}, "d": {"{": 1},
    "{": {"3": 1, "4": 1},
    "3": {"}": 1, ".": 1}, ".": {"0": 1}, "0": {"}": 1}, "4": {"}": 1},
    "=": {"7": 1}, "7": {EOS: 1}, "}": {EOS: 1},
}


class ScriptedModel(torch.nn.Module):
    """A bigram model: the next token's distribution depends only on the current token (SCRIPT; EOS elsewhere).

    It speaks the interface the rollout engine uses (position ids, attention mask and cache are ignored).
    """

    def __init__(self, tokenizer):
        super().__init__()
        vocab = tokenizer.get_vocab()
        table = torch.full((len(tokenizer), len(tokenizer)), -1e4)
        table[:, vocab[EOS]] = 0.0
        for current, nexts in SCRIPT.items():
            table[vocab[current]] = -1e4
            for token, weight in nexts.items():
                table[vocab[current], vocab[token]] = math.log(weight)
        self.table = torch.nn.Parameter(table, requires_grad=False)

    def forward(self, input_ids, past_key_values=None, **kwargs):
        return SimpleNamespace(logits=self.table[input_ids], past_key_values=past_key_values)


@pytest.fixture
def scripted(monkeypatch):
    """rlvr sample's model loader returns the scripted model (whatever model is named)."""
    import rlvr.evaluate.runner as runner

    tokenizer = build_tiny_tokenizer()
    monkeypatch.setattr(runner, "load_configured",
                        lambda *a, **k: (ScriptedModel(tokenizer), tokenizer, torch.device("cpu"), torch.float32))


@pytest.fixture
def maths_file(tmp_path):
    """Five questions: four whose answer is 3, one (q4) whose answer is 7."""
    path = tmp_path / "maths.jsonl"
    rows = [{"question": f"q{i}?", "answer": "7" if i == 4 else "3"} for i in range(5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)
