#!/usr/bin/env python3
"""Issue 15's hostile campaign, repeatable: mutated chain files and hostile arguments through
`remat simulate`, `plan`, `compare`, `tradeoff` and `run --device cpu`, each under a wall-clock
limit and a memory cap, every exit classified. docs/fuzzing.md has the command and the last results.

    scripts/hostile-campaign.py --remat build/dev/app/cli/remat --runs 20000 --jobs 2

Bases: zoo exports (vgg11, vgg11_bn, resnet18, mobilenet_v2, alexnet; batch 2 at their smallest
resolution), SqueezeNet imported from tests/data/onnx (block layers) and an abstract chain. Mutations: truncations, bad UTF-8, deep nesting, huge and
special numbers, wrong types, missing and duplicated keys, unknown kinds, NUL and trailing bytes,
1e4-1e5 layers, shapes that do not chain, and hostile checkpoint lists, planner names, steps,
seeds and timeouts. Writers (run and simulate --timeline): timelines over the input chain, over read-only files, into missing
folders and under a file-size limit.

ONNX families (--families onnx; scripts/hostile_onnx.py, Debian's python3-onnx): models that are
well-formed protobuf and wrong in one structural way (empty and dangling inputs, names defined twice,
1,000 outputs, initializer data of the wrong length or type, contradicting declarations, attributes
twice or of the wrong type, graph attributes, hostile constant plumbing, control characters in the
producer, long lists, any field of any message), through `remat import --output`, `plan` and
`simulate`. A run is a finding when it crashes, hangs, accepts a surely invalid model, prints a
control character or a line over 2000 characters, writes its output on a failure, or refuses with
a message over 2000 characters or without the file (and, where a node is to blame, the node).

A chain run is a finding when it crashes (a signal), runs past its limit, exits 1, accepts what is surely
invalid (exit 0), prints a message that does not start with "remat:", is over 1000 characters,
names the chain file without a place (FILE:LINE:COLUMN), or changes a file it must not (the input
chain, a read-only file) or leaves a temporary file behind. Findings are copied to OUT/findings.
"""
import argparse
import collections
import hashlib
import json
import multiprocessing
import os
import random
import re
import resource
import shutil
import stat
import subprocess
import sys
import time

ZOO = [("vgg11", 32), ("vgg11_bn", 32), ("resnet18", 32), ("mobilenet_v2", 32), ("alexnet", 63)]
PLANNERS = ["none", "sqrt", "greedy", "uniform:3", "dp", "linear", "optimal"]
HOSTILE_PLANNERS = ["uniform:0", "uniform:18446744073709551615", "uniform:99999", "uniform:-1", "DP", "x" * 5000,
                    "uniform:", "uniform:1e3", "", "dp\n", "optimal:1", "\u00e9\u00e9"]
HOSTILE_CHECKPOINTS = ["18446744073709551615", "18446744073709551616", "0", "-1", "3,2", "2,2", "1,,2", " 1 , 2 ",
                       "1e3", "x", ",", "1," * 5000, "9" * 400, "\x01\x1b[2J", "4294967296", "2147483648"]
HOSTILE_ARGS = [["--steps", "2147483647"], ["--steps", "0"], ["--steps", "-1"], ["--seed", "-1"],
                ["--seed", "18446744073709551616"], ["--timeout", "0"], ["--timeout", "-5"], ["--timeout", "nan"],
                ["--timeout", "1e999"]]
NUMBERS = ["1e309", "-1e309", "18446744073709551616", "18446744073709551615", "9223372036854775808", "2147483648",
           "2147483647", "-1", "-0", "0", "1.5", "1e-400", "1" + "0" * 400, "0.0", "-9223372036854775809", "3"]
VALUES = ['"3"', "true", "null", "[]", "{}", '"' + "s" * 300 + '"', "[1, 2]", '{"a": 1}']
FIELDS = ["out_channels", "kernel", "stride", "padding", "groups", "bias", "out_features", "p", "width",
          "expand_ratio", "out_bytes", "needs_input", "extra_bytes", "name", "kind", "shape", "dtype", "bytes",
          "format", "layers", "input", "output_height", "ceil_mode", "fwd_cost"]
PLACE = re.compile(r":\d+:\d+: ")


def abstract_chain(layers, rng):
    items = []
    for i in range(layers):
        items.append('{"kind": "abstract", "name": "l%d", "out_bytes": %d, "needs_input": %s, "needs_output": %s, '
                     '"extra_bytes": %d}' % (i + 1, rng.randint(1, 1 << 20), rng.choice(["true", "false"]),
                                              rng.choice(["true", "false"]), rng.randint(0, 1 << 10)))
    return ('{"format": "remat-chain/1", "name": "abstract", "input": {"bytes": 4096}, "layers": [\n  ' +
            ",\n  ".join(items) + "\n]}\n")


def make_bases(remat, folder):
    bases = {}
    for model, resolution in ZOO:
        path = os.path.join(folder, "base-%s.json" % model)
        subprocess.run([remat, "zoo", "export", model, "--batch", "2", "--resolution", str(resolution), "--output",
                        path], check=True, capture_output=True)
        bases[model] = open(path, "rb").read()
    bases["abstract"] = abstract_chain(12, random.Random(0)).encode("utf-8", "surrogateescape")
    # Imported models bring `block` layers with listed inner ops (SqueezeNet's fire modules).
    model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "onnx",
                         "squeezenet1_0_train_op12.onnx")
    if os.path.exists(model):
        path = os.path.join(folder, "base-squeezenet-import.json")
        if subprocess.run([remat, "import", model, "--batch", "2", "--output", path], capture_output=True).returncode == 0:
            bases["squeezenet-import"] = open(path, "rb").read()
    return bases


# ---- Mutations: each returns (bytes, surely_invalid) ------------------------------------------------

def spans(text, pattern):
    return [m for m in re.finditer(pattern, text)]


def replace_value(text, rng, new):
    matches = spans(text, r'"(\w+)": ?(-?[0-9.eE+]+|"[^"]*"|true|false|null)')
    if not matches:
        return text
    m = rng.choice(matches)
    return text[:m.start(2)] + new + text[m.end(2):]


def mutate(base, rng):
    text = base.decode("utf-8", "surrogateescape")  # a mutated base may not be UTF-8
    # Long chains take seconds each: one mutation in a hundred.
    kind = "many" if rng.random() < 0.01 else rng.choice(
        ["truncate", "utf8", "deep", "number", "special", "type", "missing", "duplicate", "kind", "nul", "trailing",
         "shape", "field", "empty", "double"])
    if kind == "double":
        once, _, first = mutate(base, rng)
        twice, invalid, second = mutate(once, rng)
        return twice, invalid, first + "+" + second
    unchanged = (base, False, kind + " (nothing to mutate)")
    if kind == "truncate":
        if len(text.rstrip()) < 2:
            return unchanged
        cut = rng.randrange(0, len(text.rstrip()) - 1)
        return text[:cut].encode("utf-8", "surrogateescape"), True, kind
    if kind == "utf8":
        if not spans(text, r'"(\w+)"'):
            return unchanged
        m = rng.choice(spans(text, r'"(\w+)"'))
        bad = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80"])
        raw = text.encode("utf-8", "surrogateescape")
        at = m.start() + 2
        return raw[:at] + bad + raw[at:], True, kind
    if kind == "deep":
        depth = rng.choice([7, 50, 1000, 65468, 200000])
        return replace_value(text, rng, "[" * depth + "]" * depth).encode("utf-8", "surrogateescape"), True, kind
    if kind == "number":
        return replace_value(text, rng, rng.choice(NUMBERS)).encode("utf-8", "surrogateescape"), False, kind
    if kind == "special":
        return replace_value(text, rng, rng.choice(["NaN", "Infinity", "-Infinity", "0x10", "+1", "01", ".5"])).encode("utf-8", "surrogateescape"), True, kind
    if kind == "type":
        return replace_value(text, rng, rng.choice(VALUES)).encode("utf-8", "surrogateescape"), False, kind
    if kind == "missing":
        matches = spans(text, r'"(\w+)": ?(-?[0-9.eE+]+|"[^"]*"|true|false|null),? ?')
        if not matches:
            return unchanged
        m = rng.choice(matches)
        return (text[:m.start()] + text[m.end():]).encode("utf-8", "surrogateescape"), False, kind
    if kind == "duplicate":
        matches = spans(text, r'"(\w+)": ?(-?[0-9.eE+]+|"[^"]*"|true|false|null)')
        if not matches:
            return unchanged
        m = rng.choice(matches)
        return (text[:m.end()] + ', "%s": %s' % (m.group(1), rng.choice(NUMBERS + VALUES)) + text[m.end():]).encode("utf-8", "surrogateescape"), True, kind
    if kind == "kind":
        return re.sub(r'"kind": ?"\w+"', '"kind": "%s"' % rng.choice(["transformer", "", "CONV2D", "k" * 3000]),
                      text, count=1).encode("utf-8", "surrogateescape"), True, kind
    if kind == "nul":
        return text.encode("utf-8", "surrogateescape") + b"\0" + rng.choice([b"garbage", b"", b"{}"]), True, kind
    if kind == "trailing":
        return (text + rng.choice([" x", "{}", "]", ",", "\n\n1"])).encode("utf-8", "surrogateescape"), True, kind
    if kind == "shape":
        return re.sub(r'"shape": ?\[[^\]]*\]', '"shape": %s' % rng.choice(
            ["[2, 3, 2147483648, 32]", "[2, 3]", "[]", "[0, 3, 32, 32]", "[2, 3, 1, 1]", "[2, 3, 100000, 100000]",
             "[4294967296, 4294967296, 4294967296]"]), text, count=1).encode("utf-8", "surrogateescape"), False, kind
    if kind == "field":
        field = rng.choice(FIELDS)
        return re.sub(r'"%s": ?[^,}\]]+' % field, '"%s": %s' % (field, rng.choice(NUMBERS + VALUES)), text,
                      count=1).encode("utf-8", "surrogateescape"), False, kind
    if kind == "empty":
        return rng.choice([b"", b" ", b"{}", b"[]", b"null", b"\xef\xbb\xbf{}", b"\n" * 100]), True, kind
    layers = rng.choice([10000, 100000])
    return abstract_chain(layers, rng).encode("utf-8", "surrogateescape"), False, "many-%d" % layers


# ---- Commands ----------------------------------------------------------------------------------------

def command_for(chain, rng, big):
    what = rng.random()
    timeout = ["--timeout", "10"] if big or rng.random() < 0.3 else []
    if what < 0.35:
        checkpoints = rng.choice(HOSTILE_CHECKPOINTS) if rng.random() < 0.3 else rng.choice(["", "1", "2,5", "3,6,9"])
        return ["simulate", chain, "--checkpoints", checkpoints] + (["--json"] if rng.random() < 0.3 else []), False
    if what < 0.70:
        planner = rng.choice(HOSTILE_PLANNERS) if rng.random() < 0.2 else rng.choice(PLANNERS)
        return ["plan", chain, "--planner", planner] + timeout + (["--json"] if rng.random() < 0.3 else []), planner in HOSTILE_PLANNERS
    # Runs train on the CPU: a long chain's run takes minutes of real work, which --timeout (a
    # bound on planning) does not cover, so runs get the zoo-sized chains only.
    if what < 0.85:
        return ["compare", chain] + timeout, False
    # The exact front grows with the chain: always under a deadline.
    if what < 0.97 or big:
        return ["tradeoff", chain, "--planners", "none,linear", "--timeout", "10"], False
    extra = rng.choice(HOSTILE_ARGS) if rng.random() < 0.3 else []
    return ["run", chain, "--planner", rng.choice(["none", "sqrt", "linear"]), "--device", "cpu"] + timeout + extra, bool(extra)


def limit_resources(memory_bytes, file_bytes):
    def apply():
        if memory_bytes > 0:  # 0: no cap (a sanitized build reserves terabytes of shadow memory)
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        if file_bytes:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    return apply


def digest(path):
    try:
        return hashlib.sha256(open(path, "rb").read()).hexdigest()
    except OSError:
        return None


def judge(args, proc_code, err, surely_invalid, chain, timed_out):
    if timed_out:
        return "hang"
    if proc_code < 0:
        return "crash (signal %d)" % -proc_code
    if proc_code == 1:
        return "exit 1"
    if proc_code not in (0, 2, 3):
        return "exit %d" % proc_code
    if proc_code == 0:
        return "accepted invalid" if surely_invalid else "ok"
    if not err.startswith("remat:"):
        return "message without remat:"
    if len(err) > 1000:
        return "message over 1000 characters"
    first = err.split("\n", 1)[0]
    if chain in first and not (chain + ":" in first and PLACE.search(first)) and "cannot" not in first \
            and "refusing" not in first:
        return "message without a place"
    return "refused" if proc_code == 2 else "stopped by --timeout"


def run_one(task):
    index, seed, work, remat, limit_s, memory_bytes, bases = task
    # Each run in a folder of its own: a temporary file of another run still writing is not this
    # run's leftover.
    folder = os.path.join(work, "r%06d" % index)
    os.makedirs(folder)
    rng = random.Random(seed)
    base_name = rng.choice(sorted(bases))
    text, surely_invalid, mutation = mutate(bases[base_name], rng)
    chain = os.path.join(folder, "m%06d.json" % index)
    with open(chain, "wb") as out:
        out.write(text)
    big = "many" in mutation
    args, hostile_args = command_for(chain, rng, big)
    if mutation == "many-100000" and "uniform:99999" in args:
        hostile_args = False  # K < n on a chain of 100,000 layers: a valid planner
    writer = None
    if args[0] in ("run", "simulate") and rng.random() < 0.5:
        writer = rng.choice(["input", "readonly", "missing", "fsize", "fine"])
        target = {"input": chain, "readonly": os.path.join(folder, "ro%06d.csv" % index),
                  "missing": os.path.join(folder, "missing", "t.csv"), "fsize": os.path.join(folder, "f%06d.csv" % index),
                  "fine": os.path.join(folder, "t%06d.json" % index)}[writer]
        if writer == "readonly":
            open(target, "w").write("keep")
            os.chmod(target, 0o444)
        args += ["--timeline", target]
    before = digest(chain)
    ro_before = digest(args[-1]) if writer == "readonly" else None
    started = time.time()
    timed_out = False
    try:
        proc = subprocess.run([remat] + args, capture_output=True, timeout=limit_s,
                              preexec_fn=limit_resources(memory_bytes, 4096 if writer == "fsize" else 0))
        code, err = proc.returncode, proc.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as expired:
        code, err, timed_out = -9, (expired.stderr or b"").decode("utf-8", "replace"), True
    seconds = time.time() - started
    verdict = judge(args, code, err, surely_invalid or hostile_args, chain, timed_out)
    if writer in ("input", "readonly") or (args[0] in ("run", "simulate") and digest(chain) != before):
        if digest(chain) != before:
            verdict = "clobbered the input chain"
        if writer == "readonly" and digest(args[-1]) != ro_before:
            verdict = "clobbered a read-only file"
    leftovers = [n for n in os.listdir(folder) if ".tmp-" in n and n.startswith(".")]
    if leftovers:
        verdict = "temporary file left behind"
        for name in leftovers:
            os.remove(os.path.join(folder, name))
    keep = verdict not in ("ok", "refused", "stopped by --timeout")
    result = {"index": index, "base": base_name, "mutation": mutation, "command": args[0], "writer": writer,
              "exit": code, "verdict": verdict, "seconds": round(seconds, 3), "message": err[:300],
              "message_chars": len(err)}
    if keep:
        findings = os.path.join(work, "..", "findings")
        shutil.copy(chain, os.path.join(findings, "m%06d.json" % index))
        result["args"] = [a[:200] for a in args]
    for path in {chain, args[-1] if writer else None} - {None}:
        try:
            os.chmod(path, stat.S_IWUSR | stat.S_IRUSR)
        except OSError:
            pass
    shutil.rmtree(folder, ignore_errors=True)
    return result


def run_task(task):
    function, arguments = task
    return function(arguments)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--remat", default="build/dev/app/cli/remat")
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--limit", type=float, default=30.0, help="seconds per run")
    parser.add_argument("--memory-gib", type=float, default=4.0, help="address-space cap per run (0: none)")
    parser.add_argument("--out", default="build/campaign")
    parser.add_argument("--seconds", type=float, default=0,
                        help="stop starting runs after this many seconds (0: run all --runs)")
    parser.add_argument("--families", default="chains,onnx",
                        help="chains (mutated chain files), onnx (hostile ONNX models), or both")
    args = parser.parse_args()
    remat = os.path.abspath(args.remat)
    shutil.rmtree(args.out, ignore_errors=True)
    work = os.path.join(args.out, "work")
    os.makedirs(work)
    os.makedirs(os.path.join(args.out, "findings"))
    families = set(args.families.split(","))
    memory = int(args.memory_gib * (1 << 30))
    tasks = []
    if "chains" in families:
        bases = make_bases(remat, work)
        tasks += [(run_one, (i, args.seed * 1000003 + i, os.path.abspath(work), remat, args.limit, memory, bases))
                  for i in range(args.runs)]
    if "onnx" in families:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import hostile_onnx
        tasks += [(hostile_onnx.run_one_onnx, (args.runs + i, args.seed * 1000003 + args.runs + i,
                                               os.path.abspath(work), remat, args.limit, memory, limit_resources))
                  for i in range(args.runs)]
    started = time.time()
    results = []
    with multiprocessing.Pool(args.jobs) as pool:
        for n, result in enumerate(pool.imap_unordered(run_task, tasks, chunksize=4), 1):
            results.append(result)
            if n % 1000 == 0:
                print("campaign: %d runs, %.0f s" % (n, time.time() - started), file=sys.stderr)
            if args.seconds and time.time() - started > args.seconds:
                # The hour-long runs are bounded by time, not count: stop the pool, keep what ran.
                pool.terminate()
                break
    verdicts = collections.Counter(r["verdict"] for r in results)
    by_command = collections.Counter((r["command"], r["verdict"]) for r in results)
    slowest = sorted(results, key=lambda r: -r["seconds"])[:5]
    longest = max((r["message_chars"] for r in results), default=0)
    summary = {"runs": len(results), "seconds": round(time.time() - started, 1), "verdicts": dict(verdicts),
               "by_command": {"%s: %s" % k: v for k, v in sorted(by_command.items())},
               "longest_message_chars": longest,
               "mutations": dict(collections.Counter(r["mutation"] for r in results)),
               "slowest": [{k: r[k] for k in ("index", "mutation", "command", "seconds", "verdict")} for r in slowest],
               "findings": [r for r in results if r["verdict"] not in ("ok", "refused", "stopped by --timeout")]}
    json.dump(summary, open(os.path.join(args.out, "summary.json"), "w"), indent=1)
    json.dump(results, open(os.path.join(args.out, "runs.json"), "w"))
    print(json.dumps({k: summary[k] for k in ("runs", "seconds", "verdicts", "by_command", "longest_message_chars")},
                     indent=1))
    print("campaign: findings: %d (in %s/findings)" % (len(summary["findings"]), args.out))
    return 1 if summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
