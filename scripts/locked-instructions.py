#!/usr/bin/env python3
"""Locked read-modify-writes per operation in a callgrind dump.

    scripts/locked-instructions.py DUMP OPS [TOP]

DUMP is a callgrind dump made with --dump-instr=yes (scripts/instructions.sh
--locked makes them); OPS the operations of its round. Prints the x86
instructions that lock the cache line (a `lock`-prefixed instruction, or an
`xchg` with memory, which locks implicitly) executed per operation, in all,
by object, and the TOP (default 25) sites by function. An uncontended one
costs about 20 cycles on current x86 cores, more when the line is shared:
a cost that instruction counts do not show.

How: the dump's cost lines give the executions of each instruction address
(relative to its object, as callgrind writes them); objdump disassembles
each object, and the counts of the locking instructions are summed.
"""
import collections
import re
import subprocess
import sys


def read_counts(dump):
    """{(object, address): executions} from a callgrind dump."""
    counts = collections.defaultdict(int)
    names = {}

    def name(field):
        m = re.match(r"\((\d+)\)(?: (.*))?", field)
        if not m:
            return field
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1))

    ob = None
    last = 0
    call_cost = False
    with open(dump) as f:
        for line in f:
            if line.startswith("ob="):
                ob = name(line[3:].rstrip("\n"))
                continue
            if line.startswith("cob="):
                name(line[4:].rstrip("\n"))  # defines the id, maybe
                continue
            if line.startswith("calls="):
                # The next line is the call's inclusive cost, not the
                # instruction's own: its position still counts (compression).
                call_cost = True
                continue
            if not line or line[0] not in "0123456789+-*":
                continue
            toks = line.split()
            t = toks[0]
            last = last if t == "*" else (last + int(t, 0) if t[0] in "+-" else int(t, 0))
            if call_cost:
                call_cost = False
                continue
            if len(toks) >= 3:
                counts[(ob, last)] += int(toks[2])
    return counts


LOCKED = re.compile(r"^(lock |xchg\s+\S+,\S*\(|xchg\s+\S*\()")


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    dump, ops = sys.argv[1], float(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    counts = read_counts(dump)
    by_object = collections.Counter()
    by_site = collections.Counter()
    for obj in sorted({o for o, _ in counts if o and o.startswith("/")}):
        try:
            asm = subprocess.run(
                ["objdump", "-d", "--no-show-raw-insn", "-C", obj],
                capture_output=True, text=True, check=True,
            ).stdout
        except (OSError, subprocess.CalledProcessError):
            continue
        fn = "?"
        for l in asm.splitlines():
            m = re.match(r"^([0-9a-f]+) <(.*)>:", l)
            if m:
                fn = m.group(2)
                continue
            m = re.match(r"^\s+([0-9a-f]+):\s+(.*)", l)
            if not m or not LOCKED.match(m.group(2)):
                continue
            n = counts.get((obj, int(m.group(1), 16)), 0)
            if n:
                by_object[obj.rsplit("/", 1)[-1]] += n
                ins = " ".join(m.group(2).split()[:2])
                by_site[(ins, fn)] += n
    total = sum(by_object.values())
    print(f"locked read-modify-writes per operation: {total / ops:.2f}")
    for o, n in by_object.most_common():
        print(f"  {n / ops:8.2f}  {o}")
    for (ins, fn), n in by_site.most_common(top):
        print(f"  {n / ops:8.2f}  {ins:28s} {fn[:120]}")


if __name__ == "__main__":
    main()
