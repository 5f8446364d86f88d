"""``python -m agentlog.examples``: list the examples, run one, or record the sample runs again.

    python -m agentlog.examples                       # the examples and the sample runs
    python -m agentlog.examples --run sre --store runs
    python -m agentlog.examples --regenerate [--out DIR]
"""

from __future__ import annotations

import argparse
import sys

from . import EXAMPLES, regenerate, run_example, sample_runs_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentlog.examples", description=__doc__.splitlines()[0])
    parser.add_argument("--regenerate", action="store_true", help="record the sample runs again")
    parser.add_argument("--out", help="where to write them (default: the package's sample_runs folder)")
    parser.add_argument("--run", choices=EXAMPLES, help="run one example into --store")
    parser.add_argument("--store", help="the store for --run (default: $AGENTLOG_STORE or ./agentlog-runs)")
    args = parser.parse_args(argv)
    if args.regenerate:
        out = regenerate(args.out)
        print(f"sample runs recorded in {out}", file=sys.stderr)
        return 0
    if args.run:
        run = run_example(args.run, store=args.store)
        print(f"{run.id} {run.status} {len(run)} events")
        return 0
    print("examples: " + ", ".join(EXAMPLES))
    print(f"sample runs: {sample_runs_path()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
