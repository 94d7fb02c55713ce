#!/usr/bin/env python3
"""The driver calls of the small workloads, on the emulator (EMU_TRACE=1): each call of `gather
bench --device cuda` timed between its two CUDA events must make exactly the calls listed here.
A small call's time is mostly these calls (host time, and operations in the stream before the
kernel), so one more is a regression that no timing on this machine would show.

    python3 crates/gather-cuda/emu/calls.py target/debug/gather   (libcuda.so on LD_LIBRARY_PATH)
"""
import os
import subprocess
import sys

ONE = ["cuLaunchKernel", "cuStreamSynchronize"]
# W11's fibers cover every row of self, so each block copies its row of self into the output:
# no copy before the launch.
EXPECTED = {
    "W1": ONE,
    "W2": ONE,
    "W3": ONE,
    "W4": ONE,
    "W10": ONE,
    "W11a": ONE,
    "W11b": ONE,
}


def timed_calls(gather, workload):
    """The driver calls of each timed call: those between a cuEventRecord and the next
    cuEventCreate (the bench creates and records an event before and after each call)."""
    run = subprocess.run(
        [gather, "--no-progress", "bench", "--device", "cuda", "--only", workload, "--warmup", "1",
         "--repeat", "3", "--in-process", "--scale", "0.1"],
        env={**os.environ, "EMU_TRACE": "1"}, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{workload}: gather bench failed:\n{run.stdout}\n{run.stderr}")
    names = [l[3:] for l in run.stderr.splitlines() if l.startswith("CU ")]
    # Binding the context to the thread is a thread-local operation, not a call into the GPU.
    names = [n for n in names if n != "cuCtxGetCurrent"]
    calls, current = [], None
    for n in names:
        if n == "cuEventRecord":
            if current is not None:
                calls.append(current)
            current = []
        elif n == "cuEventCreate" or n == "cuEventSynchronize":
            if current:
                calls.append(current)
            current = None
        elif current is not None:
            current.append(n)
    return calls


def main():
    gather = sys.argv[1] if len(sys.argv) > 1 else "target/debug/gather"
    bad = 0
    for w, want in EXPECTED.items():
        calls = timed_calls(gather, w)
        if len(calls) < 3:
            sys.exit(f"{w}: found {len(calls)} timed calls in the trace, expected 3")
        for got in calls:
            if got != want:
                print(f"{w}: a call made {got}, expected {want}")
                bad += 1
                break
        else:
            print(f"{w}: {len(calls)} calls, each {' + '.join(want)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
