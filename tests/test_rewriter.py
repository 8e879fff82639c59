"""The rewriter, the pattern driver and function_pass: blocks, parents and use lists stay in step."""

import pytest

from kiln.dialects import VerificationError, parse_ir, print_ir, verify
from kiln.dialects import affine as A
from kiln.dialects import tensor as T
from kiln.dialects.patterns import Pattern, apply_patterns
from kiln.dialects.rewriter import InsertPoint, OpList, Rewriter
from kiln.passes.canonicalize import canonicalize
from kiln.passes.pass_spec import function_pass

TWO_FUNCTIONS = """\
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = kiln.neg %x : tensor<4xf32>
    %1 = kiln.exp %0 : tensor<4xf32>
    %2 = kiln.add %1, %0 : tensor<4xf32>
    func.return %2 : tensor<4xf32>
  }
  func.func @g(%y: tensor<4xf32>) -> tensor<4xf32> {
    %0 = kiln.neg %y : tensor<4xf32>
    %1 = kiln.neg %0 : tensor<4xf32>
    func.return %1 : tensor<4xf32>
  }
}
"""


def _function(name="f"):
    return parse_ir(TWO_FUNCTIONS).lookup(name)


def _uses_are_consistent(root) -> bool:
    """Every operand's use list names its user once per operand slot, and nothing else."""
    for op in root.walk():
        for index, value in enumerate(op.operands):
            if value.uses.count((op, index)) != 1:
                return False
        for result in op.results:
            for user, index in result.uses:
                if user.operands[index] is not result:
                    return False
    return True


def _names(block):
    return [op.name for op in block.ops]


def test_insert_points_put_ops_where_they_say():
    function = _function()
    block = function.body
    neg, exp, add, ret = block.ops
    made = [T.NegOp([function.arguments[0]]) for _ in range(5)]
    Rewriter.insert(made[0], InsertPoint.before(exp))
    Rewriter.insert(made[1], InsertPoint.after(add))
    Rewriter.insert(made[2], InsertPoint.at_start(block))
    Rewriter.insert(made[3], InsertPoint.at_end(block))
    Rewriter.insert(made[4], InsertPoint.at_index(block, 1))
    assert block.ops == [made[2], made[4], neg, made[0], exp, add, made[1], ret, made[3]]
    assert all(op.parent is block for op in block.ops)


def test_ops_inserted_at_one_point_keep_their_order():
    function = _function()
    block = function.body
    exp = block.ops[1]
    point = InsertPoint.before(exp)
    first, second = T.NegOp([function.arguments[0]]), T.NegOp([function.arguments[0]])
    Rewriter.insert(first, point)
    Rewriter.insert(second, point)
    assert block.ops[1:4] == [first, second, exp]


def test_insert_refuses_an_op_already_in_a_block_and_points_need_a_block():
    function = _function()
    neg = function.body.ops[0]
    with pytest.raises(VerificationError, match="already in a block"):
        Rewriter.insert(neg, InsertPoint.at_end(function.body))
    with pytest.raises(VerificationError, match="in no block"):
        InsertPoint.before(T.NegOp([function.arguments[0]]))
    with pytest.raises(VerificationError, match="no place 9"):
        InsertPoint.at_index(function.body, 9)


def test_replace_by_new_ops_moves_every_use_and_drops_the_old_ones():
    function = _function()
    neg, exp, add, _ = function.body.ops
    x = function.arguments[0]
    new = T.AbsOp([x])
    Rewriter.replace(neg, new)
    assert neg.parent is None and neg not in function.body.ops
    assert [user for user, _ in new.result.uses] == [exp, add]
    assert neg.result.uses == [] and (neg, 0) not in x.uses  # the erased op reads nothing
    assert _uses_are_consistent(function)
    verify(function)


def test_replace_by_values_and_by_several_ops():
    function = _function()
    neg, exp, add, ret = function.body.ops
    Rewriter.replace(exp, neg.result)  # exp(-x) + -x  becomes  -x + -x
    assert add.operands == [neg.result, neg.result]
    first = T.ExpOp([neg.result])
    second = T.MulOp([first.result, first.result])
    Rewriter.replace(add, [first, second])
    assert function.body.ops == [neg, first, second, ret]
    assert ret.operands == [second.result]
    assert _uses_are_consistent(function)
    verify(function)


def test_replace_counts_results():
    function = _function()
    neg = function.body.ops[0]
    with pytest.raises(VerificationError, match="1 results but 2 replacements"):
        Rewriter.replace(neg, [function.arguments[0], function.arguments[0]])
    with pytest.raises(VerificationError, match="not both"):
        Rewriter.replace(neg, [T.AbsOp([function.arguments[0]]), function.arguments[0]])
    assert neg.parent is function.body  # refused before anything moved


def test_erase_refuses_an_op_still_used():
    function = _function()
    neg = function.body.ops[0]
    with pytest.raises(VerificationError, match="cannot erase kiln.neg: its result is still used"):
        Rewriter.erase(neg)
    assert neg.parent is function.body


def test_erase_drops_the_uses_of_ops_nested_in_it():
    function = _function()
    x = function.arguments[0]
    loop = A.ForOp.create(0, 4)
    inner = loop.body.append(T.NegOp([x]))  # a body reading a value from outside the loop
    loop.body.append(A.YieldOp([], {}))
    Rewriter.insert(loop, InsertPoint.before(function.body.ops[-1]))
    assert (inner, 0) in x.uses
    Rewriter.erase(loop)
    assert (inner, 0) not in x.uses and loop.parent is None
    assert _uses_are_consistent(function)


def test_move_before_inline_block_and_reorder():
    function = _function()
    block = function.body
    neg, exp, add, ret = block.ops
    Rewriter.move_before(add, add)  # nothing to do
    loop = A.ForOp.create(0, 4)
    Rewriter.insert(loop, InsertPoint.at_start(block))
    Rewriter.move_before(neg, loop)
    assert block.ops == [neg, loop, exp, add, ret]
    loop.body.append(A.YieldOp([], {}))
    moved = Rewriter.inline_block(loop.body, InsertPoint.at_end(block))
    assert loop.body.ops == [] and block.ops[-1] is moved[0] and moved[0].parent is block
    Rewriter.erase(moved[0])
    Rewriter.erase(loop)
    Rewriter.reorder(block, [neg, exp, add, ret])
    with pytest.raises(VerificationError, match="name each of them once"):
        Rewriter.reorder(block, [neg, neg, add, ret])
    with pytest.raises(VerificationError, match="name each of them once"):
        Rewriter.reorder(block, [neg, add, ret])
    assert block.ops == [neg, exp, add, ret]


def test_op_list_keeps_ops_out_of_the_ir_until_placed():
    function = _function()
    staged = OpList()
    abs_op = staged.append(T.AbsOp([function.arguments[0]]))
    assert staged.ops == [abs_op] and abs_op.parent is None
    Rewriter.insert(staged.ops, InsertPoint.at_start(function.body))
    assert function.body.ops[0] is abs_op


# -- the pattern driver ---------------------------------------------------------------------------
def _neg_of_neg(op, b):
    inner = getattr(op.operand, "op", None)
    return inner.operand if isinstance(inner, T.NegOp) else None


def test_patterns_run_to_a_fixed_point():
    function = _function("g")
    rewrites = apply_patterns(function, [Pattern(T.NegOp, _neg_of_neg)])
    assert rewrites == 1
    # the outer neg is gone; the inner one is dead, for a cleanup to remove
    assert function.body.ops[-1].operands == [function.arguments[0]]
    assert _uses_are_consistent(function)


def test_the_first_rule_that_applies_wins_and_cleanup_runs_each_iteration():
    function = _function("g")
    seen, cleanups = [], []

    def declines(op, b):
        seen.append("declines")
        return None

    patterns = [Pattern(T.ExpOp, declines), Pattern(T.NegOp, declines), Pattern(T.NegOp, _neg_of_neg)]
    apply_patterns(function, patterns, cleanup=lambda block: cleanups.append(len(block.ops)))
    assert seen.count("declines") == 3  # both negs in the first sweep, the inner (dead) one in the second
    assert cleanups == [2, 2]  # the replaced neg is erased at once


def test_a_rule_that_builds_and_declines_leaves_nothing_behind():
    function = _function("g")
    before = print_ir(function)

    def builds_then_declines(op, b):
        b.create(T.AbsOp, [op.operand])
        return None

    assert apply_patterns(function, [Pattern(T.NegOp, builds_then_declines)]) == 0
    assert print_ir(function) == before
    assert _uses_are_consistent(function)


def test_a_pattern_loop_hits_the_iteration_cap():
    function = _function("f")

    def flip(op, b):  # exp(x) -> exp(x) again, as a new op: never settles
        return b.create(T.ExpOp, [op.operand]).result

    with pytest.raises(VerificationError, match=r"did not settle after 3 iterations.*flip \(kiln.exp\)"):
        apply_patterns(function, [Pattern(T.ExpOp, flip)], max_iterations=3)


def test_canonicalize_keeps_its_rules_exact():
    module = parse_ir("""\
module {
  func.func @h(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
    %0 = kiln.constant dense<0.0> : tensor<f32>
    %1 = kiln.broadcast_to %0 : (tensor<f32>) -> tensor<3xf32>
    %2 = kiln.add %x, %1 : tensor<3xf32>
    %3 = kiln.constant dense<-0.0> : tensor<f32>
    %4 = kiln.broadcast_to %3 : (tensor<f32>) -> tensor<3xf32>
    %5 = kiln.add %x, %4 : tensor<3xf32>
    func.return %2, %5 : tensor<3xf32>, tensor<3xf32>
  }
}
""")
    canonicalize(module)
    function = module.lookup("h")
    ret = function.body.ops[-1]
    assert ret.operands[1] is function.arguments[0]  # x + -0.0 is x
    assert ret.operands[0].op.name == "kiln.add"  # x + 0.0 is not: -0.0 + 0.0 is +0.0
    assert _uses_are_consistent(function)


# -- function_pass ----------------------------------------------------------------------------------
def test_function_pass_runs_on_every_function_and_returns_the_module():
    module = parse_ir(TWO_FUNCTIONS)
    seen = []

    @function_pass
    def record(function):
        """Record each function's name."""
        seen.append(function.sym_name)

    assert record(module) is module
    assert seen == ["f", "g"]
    assert record.__doc__ == "Record each function's name." and record.__name__ == "record"
