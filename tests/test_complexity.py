"""No function in flowsim/ is too large to hold in one's head: radon's cyclomatic
complexity at most 15 (issue 21)."""
import pathlib

from radon.complexity import cc_visit

LIMIT = 15
ROOT = pathlib.Path(__file__).resolve().parents[1] / "flowsim"


def test_no_function_in_flowsim_above_complexity_15():
    over = []
    for path in sorted(ROOT.rglob("*.py")):
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity > LIMIT:
                over.append(f"{path.relative_to(ROOT.parent)}:{block.lineno} "
                            f"{block.fullname} ({block.complexity})")
    assert not over, "functions above complexity 15: " + "; ".join(over)
