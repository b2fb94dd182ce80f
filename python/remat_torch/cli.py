"""python -m remat_torch plan|record: plans for a PyTorch model from remat, applied and recorded.

  plan MODEL --planner NAME [--batch N] [--resolution R] [--remat PATH] [--output PLAN.json]
       [--record FILE] [--onnx FILE] [--threads N] [--optimizer NAME [--foreach on|off] [--grads MODE]]
  record MODEL --out FILE [--plan PLAN.json] [--batch N] [--resolution R] [--threads N]
       [--optimizer NAME [--foreach on|off] [--grads MODE]]

With --optimizer the step is the whole training step (the optimizer's second, its state existing):
plan asks remat for that step's total, record measures PyTorch's (docs/pytorch.md, "The whole step").
  profile MODEL --out CHAIN.json [--chain CHAIN.json] [--grads MODE] [--batch N] [--resolution R] [--remat PATH]
          [--threads N]

MODEL is a torchvision model name (resnet18, vgg16, mobilenet_v2, ...) or package.module:factory.
Exit 2 with a message on bad input (an unknown model, a model fx cannot trace, a plan that names
layers the model has not, remat's own refusals), nothing written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

import torch

from . import apply_plan, record_step
from .layer_map import LayerMapError, TraceError
from .plan import PlanError
from .remat_cli import RematError, make_model, plan_model
from .step import GRADS, OPTIMIZERS, make_optimizer, remat_step_args, warm_up


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m remat_torch", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def common(s, grads=GRADS, grads_note=""):
        s.add_argument("model", help="torchvision model name, or package.module:factory")
        s.add_argument("--batch", type=int, default=8, help="batch size (default 8)")
        s.add_argument("--resolution", type=int, default=224, help="input height and width (default 224)")
        s.add_argument("--channels", type=int, default=3, help="input channels (default 3)")
        s.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--optimizer", choices=("none", *OPTIMIZERS), default="none",
                       help="end the step in this optimizer's step (default none: forward and backward)")
        s.add_argument("--foreach", choices=("on", "off"), default="off",
                       help="the optimizer's foreach implementation (default off, PyTorch's for CPU parameters)")
        s.add_argument("--grads", choices=grads, default="on-backward",
                       help="on-backward: zero_grad(set_to_none=True), PyTorch 2's (default); static: set_to_none=False"
                            + grads_note)

    plan = sub.add_parser("plan", help="export to ONNX, plan with remat, apply the plan")
    common(plan)
    plan.add_argument("--planner", required=True, help="a remat planner: optimal, linear, none, ...")
    plan.add_argument("--remat", help="the remat binary (default $REMAT, build/dev/app/cli/remat, PATH)")
    plan.add_argument("--output", help="write the plan object (remat plan --json) here")
    plan.add_argument("--record", help="record one training step of the applied plan into this file")
    plan.add_argument("--onnx", help="keep the ONNX export here")

    record = sub.add_parser("record", help="record one training step's memory (a PyTorch memory snapshot)")
    common(record)
    record.add_argument("--out", required=True, help="the recording: *.json or a pickle (*.pickle)")
    record.add_argument("--plan", help="apply this plan first (remat plan --json output, or a JSON list of names)")
    profile = sub.add_parser("profile", help="PyTorch's in-op scratch of each layer, written into the chain as wf / wb")
    common(profile, (*GRADS, "in-place"),
           "; in-place: remat's paper model. The weight gradients B(l) writes under the first two come off its "
           "scratch, as the chain planned with the same --grads holds them (docs/memory-model.md 11.2)")
    profile.add_argument("--out", required=True, help="the profiled chain (remat-chain/1 JSON)")
    profile.add_argument("--chain", help="the model's chain (default: its ONNX export, imported with remat)")
    profile.add_argument("--remat", help="the remat binary (default $REMAT, build/dev/app/cli/remat, PATH)")
    return p


def _example(args) -> torch.Tensor:
    for name in ("batch", "resolution", "channels"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be at least 1")
    return torch.randn(args.batch, args.channels, args.resolution, args.resolution)


def _check_output(path: Optional[str]) -> None:
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"cannot write '{path}': the folder '{folder}' does not exist")
    if os.path.isdir(path):
        raise ValueError(f"cannot write '{path}': it is a folder")


def _whole_step(args) -> bool:
    return args.optimizer != "none"


def _record_step(model, applied, x, out, args):
    """record_step of one step; with --optimizer the whole step, after a warm-up step."""
    if not _whole_step(args):
        return record_step(applied, x, out, model_name=args.model)
    optimizer = make_optimizer(args.optimizer, model, args.foreach == "on")
    warm_up(applied, x, optimizer)
    grads = "none" if args.grads == "on-backward" else "zero"
    return record_step(applied, x, out, model_name=args.model, grads=grads, optimizer=optimizer)


def _measured(s) -> str:
    from .memory_trace import summarize

    mib = 1 << 20
    r = s["remat"]
    peak = summarize(s["device_traces"][0], r["phases"]).peak_bytes
    if "step" in r:
        return (f"whole step {(r['static_bytes'] + peak) / mib:.2f} MiB at its peak "
                f"({r['static_bytes'] / mib:.2f} MiB static, optimizer state included)")
    return f"activation peak {r['activation_peak_bytes'] / mib:.2f} MiB, static {r['static_bytes'] / mib:.2f} MiB"


def _plan(args) -> int:
    _check_output(args.output)
    _check_output(args.record)
    model = make_model(args.model).train()
    x = _example(args)
    step = remat_step_args(args.optimizer, args.foreach == "on", args.grads) if _whole_step(args) else None
    plan = plan_model(model, x, args.planner, args.remat, args.onnx, step)
    applied = apply_plan(model, plan, x)
    names = ", ".join(plan["checkpoint_names"]) or "none (store all)"
    print(f"{args.model}: planner {args.planner}, checkpoints {names}")
    mib = 1 << 20
    print(
        f"remat predicts E = {plan['dynamic_peak_bytes'] / mib:.2f} MiB dynamic, "
        f"{plan['static_bytes'] / mib:.2f} MiB static at batch {args.batch}, {args.resolution}x{args.resolution}"
        + (f": the whole step {plan['peak_bytes'] / mib:.2f} MiB ({' '.join(step)})" if step else "")
    )
    print(f"applied: {len(applied.segments)} segments, {len(applied.segments) - 1} under torch.utils.checkpoint")
    if args.output:
        from .record import write_snapshot  # the same atomic writer; a plan is JSON

        write_snapshot(plan, args.output if args.output.endswith(".json") else args.output + ".json")
        print(f"wrote {args.output}")
    if args.record:
        s = _record_step(model, applied, x, args.record, args)
        print(f"measured: {_measured(s)} (PyTorch {torch.__version__}, {s['remat']['device']}); wrote {args.record}")
    return 0


def _record(args) -> int:
    _check_output(args.out)
    model = make_model(args.model).train()
    x = _example(args)
    if args.plan:
        with open(args.plan, encoding="utf-8") as f:
            try:
                plan = json.load(f)
            except json.JSONDecodeError as error:
                raise PlanError(f"plan '{args.plan}': not JSON: {error}") from error
    applied = apply_plan(model, plan, x) if args.plan else model
    s = _record_step(model, applied, x, args.out, args)
    print(f"{args.model}: {_measured(s)}, {len(s['device_traces'][0])} trace entries; wrote {args.out}")
    return 0


def _profile(args) -> int:
    from .remat_cli import import_chain
    from .workspace import profile_workspaces, write_profiled_chain

    _check_output(args.out)
    model = make_model(args.model).train()
    x = _example(args)
    if args.chain:
        if not os.path.isfile(args.chain):
            raise ValueError(f"--chain {args.chain}: no such file")
        chain = args.chain
    else:
        chain = import_chain(model, x, args.remat)
    profile = profile_workspaces(model, x, chain, gradients_on_backward=args.grads == "on-backward",
                                 fresh_gradients=args.grads == "static")
    write_profiled_chain(chain, profile, args.out)
    mib = 1 << 20
    for name, w in profile.layers.items():
        if w.fwd_bytes or w.bwd_bytes:
            print(f"{name}: wf {w.fwd_bytes / mib:.2f} MiB ({w.fwd_at or '-'}), wb {w.bwd_bytes / mib:.2f} MiB "
                  f"({w.bwd_at or '-'}); forward discarding what it saves: {w.fwd_discard_bytes / mib:.2f} MiB")
    print(f"{args.model}: PyTorch {profile.torch_version}, {profile.threads} thread(s), batch {args.batch}; wrote {args.out}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    try:
        return {"plan": _plan, "record": _record, "profile": _profile}[args.command](args)
    except (ValueError, TraceError, LayerMapError, PlanError, RematError, OSError) as error:
        print(f"remat_torch: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
