"""Ports a flash-linear-attention test function to deltac: the syntax-tree
rewrite behind tests/gpu/fla_peer.py (which runs the ported tests on the
GPU; its docstring says what the port does and why). Pure `ast`, no torch:
tests/peer/fla_port_test.py checks it in CI on a sample written in FLA's
style.
"""
import ast

# FLA's functions the module provides under the same name.
SERVED = ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "chunk_kda",
          "fused_recurrent_kda", "fused_recurrent_kda_fwd", "chunk_delta_rule",
          "fused_recurrent_delta_rule")
# FLA's functions a test may call under test that the module does not have
# (name: why), refused as not covered.
UNSERVED = {}
PREFIX = "__deltac_"


def _names(node, ctx):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _targets(stmt):
    out = set()
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    for t in targets:
        out |= _names(t, ast.Store)
    return out


def _reads_grad(node):
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in ast.walk(node))


class _NoneFor(ast.NodeTransformer):
    """Replaces `x.grad` and the tainted names by None (in a return)."""

    def __init__(self, tainted):
        self.tainted = tainted

    def visit_Attribute(self, node):
        if node.attr == "grad":
            return ast.copy_location(ast.Constant(None), node)
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.tainted and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(None), node)
        return node


class _Serve(ast.NodeTransformer):
    """Calls of FLA's functions under test (`only` of them, if given) go to
    deltac's."""

    def __init__(self, only=None):
        self.count = 0
        self.only = only

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in SERVED + tuple(UNSERVED) and \
                (self.only is None or node.func.id in self.only):
            node.func = ast.copy_location(ast.Name(PREFIX + node.func.id, ast.Load()), node.func)
            self.count += 1
        return node


def _calls(node):
    return {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and
            isinstance(c.func, ast.Name) and c.func.id in SERVED + tuple(UNSERVED)}


def _is_raises(node):
    """`with pytest.raises(...)`: FLA's error-message checks, FLA's own."""
    return isinstance(node, ast.With) and any(
        isinstance(i.context_expr, ast.Call) and isinstance(i.context_expr.func, ast.Attribute)
        and i.context_expr.func.attr == "raises" for i in node.items)


def _raises_blocks(fn):
    """The statements inside `with pytest.raises(...)` blocks (not ported)."""
    inside = set()
    for node in ast.walk(fn):
        if _is_raises(node):
            inside |= {id(n) for n in ast.walk(node)}
    return inside


def _called_under_test(fn):
    """The FLA functions a test calls under test (in `tri...` assignments
    and `run_tri...` functions), and whether it names none that way: then
    every assignment from such a call outside `pytest.raises`, other than
    to a `ref...` name, is under test (FLA's shape tests)."""
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(n.startswith("tri") for n in _targets(node)):
            names |= _calls(node.value)
        elif isinstance(node, ast.FunctionDef) and node.name.startswith(("run_tri", "tri")):
            names |= _calls(node)
    if names:
        return names, False
    raises = _raises_blocks(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and id(node) not in raises and \
                not any(n.startswith("ref") for n in _targets(node)):
            names |= _calls(node.value)
    return names, True


class Port:
    """Ports one test function. Where FLA's reference (a `ref...`
    assignment) is the function under test itself, run with other options
    (FLA checks the function against itself: state_v_first, the in-kernel
    sigmoid), the reference goes to deltac's too (`self_refs`); a reference
    by another function (FLA's naive ones, its recurrent kernel for a
    chunk test) stays FLA's."""

    def __init__(self, under_test):
        self.served = 0
        self.self_refs = 0
        self.names, self.generic = under_test

    def body(self, stmts, tainted, under_test):
        out = []
        for s in stmts:
            s = self.stmt(s, tainted, under_test)
            if s is not None:
                out.append(s)
        return out

    def stmt(self, s, tainted, under_test):
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "backward":
            return None
        if isinstance(s, ast.FunctionDef):
            inner = s.name.startswith(("run_tri", "tri"))
            s.body = self.body(s.body, set(tainted), under_test or inner) or [ast.Pass()]
            return s
        if _is_raises(s):
            return s
        if isinstance(s, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            for field in ("body", "orelse", "finalbody"):
                if hasattr(s, field) and getattr(s, field):
                    kept = self.body(getattr(s, field), tainted, under_test)
                    setattr(s, field, kept or ([ast.Pass()] if field == "body" else []))
            for h in getattr(s, "handlers", []):
                h.body = self.body(h.body, tainted, under_test) or [ast.Pass()]
            return s
        if _reads_grad(s) or (_names(s, ast.Load) & tainted):
            if isinstance(s, ast.Return):
                return _NoneFor(tainted).visit(s)
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                tainted |= _targets(s)
            return None
        if isinstance(s, ast.Assert):
            # FLA's plain asserts (shapes, dtypes) count as checks.
            check = ast.Call(ast.Name("__peer_assert", ast.Load()),
                             [s.test, s.msg or ast.Constant(None)], [])
            return ast.copy_location(ast.Expr(check), s)
        if under_test or (isinstance(s, ast.Assign) and (
                any(n.startswith("tri") for n in _targets(s)) or
                (self.generic and not any(n.startswith("ref") for n in _targets(s))))):
            serve = _Serve()
            s = serve.visit(s)
            self.served += serve.count
        elif isinstance(s, ast.Assign) and any(n.startswith("ref") for n in _targets(s)):
            serve = _Serve(self.names)
            s = serve.visit(s)
            self.self_refs += serve.count
        return s


def port_module(path):
    """The test module's AST with each test function ported; {name: (calls
    under test, references sent to deltac too)}."""
    tree = ast.parse(open(path).read(), path)
    served = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            port = Port(_called_under_test(node))
            node.body = port.body(node.body, set(), False) or [ast.Pass()]
            served[node.name] = (port.served, port.self_refs)
    ast.fix_missing_locations(tree)
    return tree, served
