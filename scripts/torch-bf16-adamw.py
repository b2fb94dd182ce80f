#!/usr/bin/env python3
"""Pure bf16's optimizer update against PyTorch's (docs/memory-model.md 11.7): AdamW on a bfloat16
parameter of 100,000 elements (torch.optim.AdamW, foreach=False, PyTorch's defaults but lr 1e-3)
against the CPU executor's rule (core/src/cpu/optimizer_step.cpp, halfAdam): each element computed
in float32 from the stored bfloat16 parameter, gradient and moments, every stored result rounded to
bfloat16 once. PyTorch rounds after each in-place op instead. Prints, after 1 and 5 steps, how many
parameters differ, by how many bfloat16 steps (ulps), and the state's dtype (bfloat16: zeros_like(p)).
Run: /usr/bin/python3 scripts/torch-bf16-adamw.py
"""
import torch

torch.manual_seed(0)
COUNT = 100000
LR, BETA1, BETA2, EPS, DECAY = 1e-3, 0.9, 0.999, 1e-8, 0.01


def ours(q, m, v, g, t):
    pf = q.float() * (1 - LR * DECAY)
    gf = g.float()
    mf = m.float()
    mf = mf + (gf - mf) * (1 - BETA1)
    vf = v.float() * BETA2 + (1 - BETA2) * gf * gf
    denominator = vf.sqrt() / ((1 - BETA2**t) ** 0.5) + EPS
    pf = pf - (LR / (1 - BETA1**t)) * mf / denominator
    return pf.to(torch.bfloat16), mf.to(torch.bfloat16), vf.to(torch.bfloat16)


def main():
    p0 = (torch.randn(COUNT) * 0.05).to(torch.bfloat16)
    for steps in (1, 5):
        p = torch.nn.Parameter(p0.clone())
        opt = torch.optim.AdamW([p], lr=LR, foreach=False)
        q, m, v = p0.clone(), torch.zeros(COUNT, dtype=torch.bfloat16), torch.zeros(COUNT, dtype=torch.bfloat16)
        for t in range(1, steps + 1):
            g = (torch.randn(COUNT) * 0.01).to(torch.bfloat16)
            p.grad = g.clone()
            opt.step()
            q, m, v = ours(q, m, v, g, t)
        a = p.detach().view(torch.int16).int()
        b = q.view(torch.int16).int()
        same_sign = (a < 0) == (b < 0)
        ulps = (a - b).abs()[same_sign]
        state = opt.state[p]
        print(f"{steps} step(s): {100 * (a != b).float().mean():.2f}% of the parameters differ, "
              f"{100 * (ulps > 1).float().mean():.2f}% by more than one ulp, {int((~same_sign).sum())} in sign; "
              f"state {state['exp_avg'].dtype}, {state['exp_avg_sq'].dtype}")


if __name__ == "__main__":
    main()
