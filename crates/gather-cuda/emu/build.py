#!/usr/bin/env python3
"""Builds the CPU emulator of the CUDA driver (driver.cpp), with every kernel source of
gather-cuda compiled as C++ beside it, into DIR/libcuda.so (default target/cuda-emu).

With DIR first on LD_LIBRARY_PATH, cudarc loads it as the driver: the GPU tests
(`GATHER_CUDA_TESTS=1 cargo test -p gather-cuda --test gpu`) and `gather conformance --device
cuda` then run on the CPU. NVRTC still compiles every kernel (the names of a module's kernels
pick its emulated source), so that stays checked too. Needs g++ (C++17) on x86-64 Linux.

usage: build.py [--asan] [DIR]

--asan builds it with AddressSanitizer, allocations unrounded: a kernel that reads or writes
past a buffer stops with ASan's report (run the tests with LD_PRELOAD=$(g++
-print-file-name=libasan.so) and ASAN_OPTIONS=detect_leaks=0).
"""
import os
import pathlib
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = pathlib.Path(__file__).resolve().parent
KERNELS = HERE.parent / "src" / "kernels"
DEVICE = HERE.parent / "src" / "device.rs"
FLAGS = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-fno-strict-aliasing",
         "-ffp-contract=off", "-w", f"-I{HERE}"]


def sources():
    """device.rs's `Source::text`: each source's name and the files it joins."""
    text = DEVICE.read_text()
    body = text[text.index("fn text(self)"):]
    body = body[:body.index("\n    }\n")]
    arms = re.findall(
        r'Source::(\w+) =>\s*\{?\s*format!\("([^"]*)",\s*kernel!\("([\w.]+)"\)', body)
    if len(arms) != body.count("Source::"):
        sys.exit("build.py: could not read every arm of Source::text in device.rs")
    return [(name, ["common.cuh"] + (["reduce.cuh"] if "{REDUCE}" in fmt else []) + [file])
            for name, fmt, file in arms]


# A kernel's launch bounds are a hint to ptxas; the emulator drops them.
KERNEL = re.compile(
    r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)')


def unit(name, files, out):
    """One source as a C++ file: its text inside namespace emu_NAME, the kernels as plain
    functions, a trampoline per kernel that unpacks the launch's parameters, and the table."""
    joined = out / f"{name}.cu"
    joined.write_text("\n".join((KERNELS / f).read_text() for f in files))
    pre = subprocess.run(["g++", "-E", "-x", "c++", "-DGATHER_CUDA_EMU", str(joined)],
                         check=True, capture_output=True, text=True).stdout
    kernels = []
    for kname, params in KERNEL.findall(pre):
        types = []
        for p in filter(None, (p.strip() for p in params.split(","))):
            m = re.match(r"(.*?)(\w+)$", p, re.S)
            types.append(" ".join(m.group(1).split()))
        kernels.append((kname, types))
    if not kernels:
        sys.exit(f"build.py: no kernels found in {name}")
    tramps = "\n".join(
        f"void tramp_{k}(void** p) {{ {k}({', '.join(f'*({t}*)p[{i}]' for i, t in enumerate(ts))}); }}"
        for k, ts in kernels)
    table = ",\n    ".join(f'{{"{k}", &emu_{name}::tramp_{k}}}' for k, _ in kernels)
    cpp = out / f"{name}.cpp"
    cpp.write_text(
        f'#include "emu.h"\nnamespace emu_{name} {{\n'
        + KERNEL.sub(lambda m: f"__global__ void {m.group(1)}({m.group(2)})", pre)
        + f"\n{tramps}\n}}  // namespace emu_{name}\n"
        + f'static emu::Register registered("{name}", {{\n    {table}\n}});\n')
    return cpp


def compile_one(cpp, out):
    obj = out / f"{cpp.stem}.o"
    subprocess.run(["g++", *FLAGS, "-c", str(cpp), "-o", str(obj)], check=True)
    return obj


def main():
    args = sys.argv[1:]
    if "--asan" in args:
        args.remove("--asan")
        FLAGS.extend(["-fsanitize=address", "-fno-omit-frame-pointer", "-DEMU_ASAN"])
    out = pathlib.Path(args[0] if args else "target/cuda-emu").resolve()
    out.mkdir(parents=True, exist_ok=True)
    cpps = [unit(name, files, out) for name, files in sources()] + [HERE / "driver.cpp"]
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        objs = list(pool.map(lambda c: compile_one(c, out), cpps))
    lib = out / "libcuda.so.1"
    asan = ["-fsanitize=address"] if "-DEMU_ASAN" in FLAGS else []
    subprocess.run(["g++", "-shared", *asan, "-o", str(lib), *map(str, objs)], check=True)
    link = out / "libcuda.so"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(lib.name)
    print(f"built {lib} ({len(cpps) - 1} kernel sources)")


if __name__ == "__main__":
    main()
