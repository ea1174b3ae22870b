"""rlvr.deadline: a user's call past its limit ends, whatever it does with the interruption; a stuck one ends
the process with one line; a call given up on Ctrl-C ends too; stuck worker threads never keep a process alive."""

import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from rlvr import deadline
from rlvr.errors import StepAbandoned, UserError


def sleeps(seconds):
    time.sleep(seconds)
    return "slept"


def swallows_every_interruption(items):
    """A bare `except:` around each item, as a careless reward writes it."""
    done = []
    for _ in range(items):
        try:
            time.sleep(5)
        except:  # noqa: E722
            done.append(1)
    return len(done)


def ignores_ctrl_c_then_sleeps():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    time.sleep(30)


def limited(fn, limit=0.3, **kwargs):
    """(what came out, seconds taken) of `fn(**kwargs)` under a limit of `limit` seconds."""
    start = time.monotonic()
    try:
        out = deadline.call_with_time_limit("reward function 'f'", fn, kwargs, limit, "rewards[].timeout_s")
    except UserError as e:
        out = e
    return out, time.monotonic() - start


def test_a_call_within_its_limit_returns_its_value_and_is_running_meanwhile():
    seen = []
    out, _ = limited(lambda: seen.append(deadline.running().name) or "ok", limit=5)
    assert out == "ok" and seen == ["reward function 'f'"] and deadline.running() is None


@pytest.mark.parametrize("fn, kwargs", [(sleeps, {"seconds": 30}), (swallows_every_interruption, {"items": 4}),
                                        (ignores_ctrl_c_then_sleeps, {})])
def test_a_call_past_its_limit_ends_in_one_line_whatever_it_does_with_the_interruption(fn, kwargs):
    before = signal.getsignal(signal.SIGINT)
    out, took = limited(fn, **kwargs)
    assert isinstance(out, UserError) and str(out) == (
        "reward function 'f' did not return within its time limit of 0.3 s "
        "(make it faster, or raise rewards[].timeout_s; 0 = no limit)")
    assert took < 5  # (a call interrupted only once would take 4 × 5 s here)
    assert signal.getsignal(signal.SIGINT) is before  # a function's SIG_IGN does not outlive it


def test_a_late_interruption_never_lands_after_the_call():
    for i in range(20):  # calls that end about when their limit passes
        out, _ = limited(sleeps, limit=0.01, seconds=0.008 + 0.0002 * i)
        assert out == "slept" or isinstance(out, UserError)
    time.sleep(2 * deadline.REPEAT_S)  # nothing left pending fires here (it would raise in this test)


def test_off_the_main_thread_it_is_a_plain_call():
    out = []
    thread = threading.Thread(target=lambda: out.append(limited(sleeps, limit=0.1, seconds=0.3)[0]))
    thread.start()
    thread.join()
    assert out == ["slept"]


def test_a_call_given_up_on_a_signal_is_interrupted_until_it_ends():
    def abandon_soon(items):
        threading.Timer(0.2, lambda: deadline.abandon(deadline.running(), "Ctrl-C", signal.SIGINT)).start()
        return swallows_every_interruption(items)

    def first_interrupt_then_abandon():
        call = deadline.running()
        threading.Timer(0.2, lambda: (deadline.abandon(call, "Ctrl-C", signal.SIGINT),
                                      signal.pthread_kill(threading.main_thread().ident, deadline.SIGNAL))).start()
        time.sleep(30)

    assert limited(abandon_soon, limit=0, items=3)[0] == 3  # swallowed each time, then returned
    with pytest.raises(StepAbandoned):
        limited(first_interrupt_then_abandon, limit=0)


def run_script(body, timeout=30):
    code = textwrap.dedent("""
        import signal, sys, threading, time
        from rlvr import deadline
        deadline.ESCALATE_S = 1.0
    """) + textwrap.dedent(body)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - start


def test_a_call_that_cannot_be_interrupted_ends_the_process_with_one_line():
    done, took = run_script("""
        def stuck():  # the interruption never reaches Python code, as in a C library that never returns
            signal.pthread_sigmask(signal.SIG_BLOCK, [deadline.SIGNAL])
            time.sleep(60)
        with deadline.exit_note(lambda: "the last checkpoint, step-000003, is kept"):
            deadline.call_with_time_limit("reward function 'stuck'", stuck, {}, 0.5)
    """)
    assert done.returncode == 2 and took < 15
    assert done.stderr.strip().splitlines() == [
        "rlvr: error: reward function 'stuck' did not stop when interrupted (its time limit of 0.5 s "
        "(rewards[].timeout_s) passed; it catches the interruption, or is stuck outside Python): the process ends "
        "here without finishing the step; the last checkpoint, step-000003, is kept"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_call_given_up_on_a_stop_signal_that_will_not_end_ends_the_process_with_the_signals_code(signum):
    """128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM), as the shell's convention has it."""
    done, took = run_script(f"""
        def stuck():
            signal.pthread_sigmask(signal.SIG_BLOCK, [deadline.SIGNAL])
            call = deadline.running()
            why = "{signum.name} gave the step up"
            threading.Timer(0.2, lambda: deadline.abandon(call, why, {int(signum)})).start()
            time.sleep(60)
        deadline.call_with_time_limit("environment Game.step()", stuck, {{}}, 0)
    """)
    assert done.returncode == 128 + signum and took < 15
    assert f"environment Game.step() did not stop when interrupted ({signum.name} gave the step up;" in done.stderr


def test_a_worker_stuck_for_ever_does_not_keep_the_process_alive():
    done, took = run_script("""
        pool = deadline.DaemonPool(2)
        stuck = pool.submit(time.sleep, 3600)
        assert pool.submit(pow, 2, 3).result() == 8
        pool.close()
        print("leaving")
    """)
    assert done.returncode == 0 and done.stdout == "leaving\n" and took < 15


def test_a_worker_reports_sys_exit_to_the_caller():
    pool = deadline.DaemonPool(1)
    with pytest.raises(SystemExit):
        pool.submit(sys.exit, 5).result(timeout=5)
    pool.close()


def test_the_interruption_never_raises_in_this_modules_own_bookkeeping(monkeypatch):
    """A signal that lands after the call returned, while call_with_time_limit closes it, must not raise there
    (the watchdog tries again later, and finds the call done)."""
    call = deadline.UserCall("reward function 'f'", 1.0, "rewards[].timeout_s", due=0.0, interruptions=1)
    monkeypatch.setattr(deadline, "_current", call)
    scope = {}
    exec(compile("import sys; own = sys._getframe()", deadline.__file__, "exec"), scope)
    deadline._interrupt(deadline.SIGNAL, scope["own"])  # inside rlvr.deadline: nothing
    with pytest.raises(deadline.TimeLimitReached):
        deadline._interrupt(deadline.SIGNAL, sys._getframe())  # inside the user's function
    call.done = True
    deadline._interrupt(deadline.SIGNAL, sys._getframe())  # the call is over: nothing


@pytest.mark.parametrize("finish_on_stop", [True, False])
def test_a_first_ctrl_c_lets_a_finish_on_stop_call_finish_and_gives_any_other_up(finish_on_stop):
    """The weight push after an update is such a call: giving it up would lose a step already taken (a checkpoint
    of step t without step t's metrics)."""
    from rlvr.run.stop import StopFlag, stop_on_signals

    def signalled_then_sleeps():
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        time.sleep(0.3)
        return "pushed"

    flag = StopFlag()
    with stop_on_signals(flag):
        if finish_on_stop:
            assert deadline.call_with_time_limit("the engine's weight push", signalled_then_sleeps, {}, 30,
                                                 finish_on_stop=True) == "pushed"
        else:
            with pytest.raises(StepAbandoned):
                deadline.call_with_time_limit("reward function 'f'", signalled_then_sleeps, {}, 30)
    assert flag.stop_requested


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_call_that_starts_after_a_stop_signal_is_given_up_unless_it_returns_at_once(signum):
    """The signal came between a step's calls (an environment's step handed to its worker, the main thread not yet
    waiting for it): the next call is given up REPEAT_S after it starts, not waited for for ever; one that
    returns at once still returns, and the stop ends with the run's handlers."""
    from rlvr.run.stop import StopFlag, stop_on_signals

    flag = StopFlag()
    with stop_on_signals(flag):
        signal.raise_signal(signum)
        assert flag.stop_requested and flag.signal == signum
        assert deadline.call_with_time_limit("reward function 'quick'", lambda: "scored", {}, 0) == "scored"
        start = time.monotonic()
        with pytest.raises(StepAbandoned):
            deadline.call_with_time_limit("environment Game.step()", lambda: time.sleep(20), {}, 0)
        assert time.monotonic() - start < 10
    assert deadline.running() is None and deadline._stop is None


def test_a_call_within_a_call_given_up_on_a_signal_gives_the_outer_one_up_too():
    """A judge's own limit inside the reward call around it (rlvr.rewards.routing.as_verdict): Ctrl-C gives both
    up; the outer one must not read the KeyboardInterrupt as its function's own raise."""
    previous = signal.signal(signal.SIGINT, lambda *_: None)  # a run's handler is in place
    try:
        def inner():
            call = deadline.running()
            give_up = lambda: deadline.abandon(call, "Ctrl-C", signal.SIGINT, raises=KeyboardInterrupt)  # noqa: E731
            threading.Timer(0.2, give_up).start()
            time.sleep(30)

        with pytest.raises(KeyboardInterrupt):
            deadline.call_user("outer", lambda: deadline.call_user("inner", inner, 5.0, "x", "fix"), None, "y", "fix")
    finally:
        signal.signal(signal.SIGINT, previous)
