"""No function in flowsim/ is too large to hold in one's head: radon's cyclomatic
complexity at most 15 for every function, method, closure and inner class's method
(a closure is scored on its own, not only as part of the function around it)."""
import pathlib

from radon.complexity import cc_visit

LIMIT = 15
ROOT = pathlib.Path(__file__).resolve().parents[1] / "flowsim"


def scored(blocks, outer=""):
    """``(qualified name, block)`` of radon's ``blocks`` and, recursively, of their
    closures, methods and inner classes (a Class block's own score is its methods'
    mean: only its methods are scored; radon also lists a class's methods beside it,
    they are scored once, under the class)."""
    for block in blocks:
        if not outer and getattr(block, "is_method", False):
            continue
        name = f"{outer}{block.name}"
        inner = (getattr(block, "closures", []) + getattr(block, "methods", [])
                 + getattr(block, "inner_classes", []))
        if not hasattr(block, "methods"):
            yield name, block
        yield from scored(inner, name + ".")


def test_the_walk_scores_closures_methods_and_inner_classes():
    source = (
        "def outer(x):\n"
        "    def inner(y):\n" + "".join(f"        if y == {i}:\n            return {i}\n"
                                        for i in range(3)) +
        "    return inner\n"
        "class A:\n"
        "    def m(self):\n        return 1\n"
        "    class B:\n"
        "        def n(self, z):\n            return z if z else 0\n")
    found = {name: block.complexity for name, block in scored(cc_visit(source))}
    assert found == {"outer": 1, "outer.inner": 4, "A.m": 1, "A.B.n": 2}, found


def test_no_function_in_flowsim_above_complexity_15():
    over = []
    for path in sorted(ROOT.rglob("*.py")):
        for name, block in scored(cc_visit(path.read_text(encoding="utf-8"))):
            if block.complexity > LIMIT:
                over.append(f"{path.relative_to(ROOT.parent)}:{block.lineno} "
                            f"{name} ({block.complexity})")
    assert not over, "functions above complexity 15: " + "; ".join(over)
