"""certgrad.jax and certgrad.testing on custom_vjp rules written the way JAX
users write them: each correct rule must be CERTIFIED and its twin with one
planted bug REFUTED, with the input that carries the bug named.

Which twin is right is known from the mathematics (softmax's Jacobian
diag(y) − y yᵀ, layer norm's rstd = 1/√(var + ε), an embedding's gradient
summed over repeated ids), never from certgrad's own output.
"""

import dataclasses

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import certgrad.jax as cj  # noqa: E402
from certgrad.testing import VjpAssertionError, assert_vjp  # noqa: E402

RNG = np.random.default_rng(19)


def normal(*shape):
    return RNG.normal(size=shape).astype(np.float32)


# ----------------------------------------------------------------- softmax


def make_softmax(bug):
    @jax.custom_vjp
    def softmax(x):
        m = jnp.max(x, axis=-1, keepdims=True)  # the stabilising shift
        e = jnp.exp(x - m)
        return e / jnp.sum(e, axis=-1, keepdims=True)

    def fwd(x):
        y = softmax(x)
        return y, y

    def bwd(y, dy):
        s = jnp.sum(dy * y, axis=-1, keepdims=True)
        if bug:
            return (-y * s,)  # BUG: the diagonal term y ⊙ dy is missing
        return (y * (dy - s),)

    softmax.defvjp(fwd, bwd)
    return softmax


def test_stable_softmax_certified():
    r = cj.check_vjp(make_softmax(False), normal(3, 7))
    assert r.verdict == "certified", repr(r)
    assert r.points == 3 and r.inputs[0].name == "x" and r.inputs[0].probes >= 6
    assert r.refutation is None


def test_softmax_missing_diagonal_refuted():
    r = cj.check_vjp(make_softmax(True), normal(3, 7))
    assert r.verdict == "refuted", repr(r)
    assert r.refutation.name == "x"
    assert len(r.refutation.element) == 2
    assert "REFUTED" in repr(r)


# -------------------------------------------------------------- layer norm

EPS = 1e-5


def make_layernorm(bug):
    @jax.custom_vjp
    def layernorm(x, gamma, beta):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return gamma * (x - mu) * lax.rsqrt(var + EPS) + beta

    def fwd(x, gamma, beta):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        # BUG twin: ε added to the standard deviation instead of the variance.
        rstd = 1.0 / (jnp.sqrt(var) + EPS) if bug else lax.rsqrt(var + EPS)
        xhat = (x - mu) * rstd
        return gamma * xhat + beta, (xhat, rstd, gamma)

    def bwd(res, dy):
        xhat, rstd, gamma = res
        gh = dy * gamma
        dx = rstd * (gh - jnp.mean(gh, -1, keepdims=True) - xhat * jnp.mean(gh * xhat, -1, keepdims=True))
        return dx, jnp.sum(dy * xhat, axis=0), jnp.sum(dy, axis=0)

    layernorm.defvjp(fwd, bwd)
    return layernorm


def ln_args():
    return normal(4, 16), 1.0 + 0.1 * normal(16), normal(16)


def test_layernorm_certified():
    r = cj.check_vjp(make_layernorm(False), *ln_args())
    assert r.certified, repr(r)
    assert [i.name for i in r.inputs] == ["x", "gamma", "beta"]
    assert all(i.checked and i.probes >= 6 for i in r.inputs)
    assert r.evidence.startswith("f64-tol")  # rsqrt: not rational


def test_layernorm_wrong_eps_placement_refuted_on_x():
    r = cj.check_vjp(make_layernorm(True), *ln_args())
    assert r.refuted, repr(r)
    # The wrong rstd enters dx first (the certifier checks x before γ, β).
    assert r.refutation.name == "x"
    assert r.inputs[0].refuted and not r.inputs[1].refuted
    # The gap is of the order ε/(2·var): tiny, yet far beyond f64 rounding.
    assert 0 < r.refutation.gap


# --------------------------------------------------------- gather embedding

IDS = np.array([[1, 3, 1], [7, 3, 3]], np.int32)  # rows 1 and 3 repeat


def make_embedding(bug):
    @jax.custom_vjp
    def embed(table, ids):
        return table[ids]  # stablehlo.gather

    def fwd(table, ids):
        return table[ids], (ids, table.shape)

    def bwd(res, dy):
        ids, shape = res
        zero = jnp.zeros(shape, dy.dtype)
        # BUG twin: .set overwrites where an id repeats; the gradient sums.
        dtable = zero.at[ids].set(dy) if bug else zero.at[ids].add(dy)
        return dtable, None

    embed.defvjp(fwd, bwd)
    return embed


def test_gather_embedding_certified_with_integer_ids_held():
    r = cj.check_vjp(make_embedding(False), normal(10, 4), IDS)
    assert r.certified, repr(r)
    table, ids = r.inputs
    assert table.checked and table.name == "table"
    assert not ids.checked and ids.dtype == "int32" and "held" in ids.role
    assert r.evidence == "exact"  # gather/scatter-add/multiply: rational


def test_gather_embedding_overwrite_refuted_at_a_repeated_row():
    r = cj.check_vjp(make_embedding(True), normal(10, 4), IDS)
    assert r.refuted, repr(r)
    assert r.refutation.name == "table"
    # Only rows whose id repeats lose contributions under .set.
    assert r.refutation.element[0] in (1, 3)


def test_embedding_overwrite_passes_when_no_id_repeats():
    # Control of the control: with distinct ids .set and .add agree, so the
    # "bug" is no bug there, and the certifier must not cry wolf.
    r = cj.check_vjp(make_embedding(True), normal(10, 4), np.array([[0, 2, 4], [5, 6, 9]], np.int32))
    assert r.certified, repr(r)


# ------------------------------------------------- pytrees, kwargs, outputs


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Dense:
    w: jax.Array
    b: jax.Array


def make_dense(bug):
    @jax.custom_vjp
    def dense(params, x):
        return {"y": x @ params["layer"].w + params["layer"].b, "norm": jnp.sum(x * x)}

    def fwd(params, x):
        return dense(params, x), (params, x)

    def bwd(res, ct):
        params, x = res
        dy, dn = ct["y"], ct["norm"]
        w = params["layer"].w
        db = jnp.mean(dy, axis=0) if bug else jnp.sum(dy, axis=0)  # BUG: mean for sum
        dx = dy @ w.T + 2.0 * dn * x
        return {"layer": Dense(w=x.T @ dy, b=db)}, dx

    dense.defvjp(fwd, bwd)
    return dense


def dense_args():
    return {"layer": Dense(w=normal(5, 3), b=normal(3))}, normal(4, 5)


def test_pytree_dataclass_and_two_outputs_certified():
    r = cj.check_vjp(make_dense(False), *dense_args())
    assert r.certified, repr(r)
    # tree_util order: dict keys sorted, dataclass fields in declaration order.
    assert [i.name for i in r.inputs] == ["params['layer'].w", "params['layer'].b", "x"]


def test_pytree_bug_names_the_leaf():
    r = cj.check_vjp(make_dense(True), *dense_args())
    assert r.refuted, repr(r)
    assert r.refutation.name == "params['layer'].b"


def test_integer_bool_and_static_arguments_and_kwargs():
    # f(x, mask, k, *, scale, power): x and scale differentiated, mask (bool)
    # and k (int array) held at their values, power (Python int) static.
    def f(x, mask, k, *, scale, power):
        y = jnp.where(mask, x * scale, 0.0) ** power
        return jnp.sum(y * k.astype(jnp.float32), axis=0), jnp.argmax(x, axis=0)  # second output: integer

    x = normal(6, 3)
    mask = RNG.random((6, 3)) > 0.4
    k = RNG.integers(0, 5, size=(6, 3)).astype(np.int32)
    r = cj.check_grad(f, x, mask, k, scale=np.float32(1.5), power=2)
    assert r.certified, repr(r)
    roles = {i.name: i.role for i in r.inputs}
    assert roles["x"] == "checked" and roles["scale"] == "checked"
    assert "held" in roles["mask"] and "held" in roles["k"]
    assert roles["power"].startswith("static")


def test_check_grad_sees_through_stop_gradient():
    # JAX's derivative of x·stop_gradient(x) is x, not 2x: not the VJP of f.
    r = cj.check_grad(lambda x: x * lax.stop_gradient(x), normal(8))
    assert r.refuted, repr(r)
    assert cj.check_grad(lambda x: x * x, normal(8)).certified


def test_check_grad_safe_where_trick_certified():
    def safe_norm(x):
        s = jnp.sum(x * x, axis=-1)
        ok = s > 0
        return jnp.where(ok, jnp.sqrt(jnp.where(ok, s, 1.0)), 0.0)

    r = cj.check_grad(safe_norm, normal(4, 3))
    assert r.certified, repr(r)


def test_given_points_and_example_point():
    sm = make_softmax(False)
    x = normal(2, 5)
    r = cj.check_vjp(sm, x, at="example")
    assert r.certified and r.given_point, repr(r)
    r = cj.check_vjp(sm, x, points=[(normal(2, 5),), (8 * normal(2, 5),)])
    assert r.certified and r.points == 2, repr(r)
    r = cj.check_vjp(make_softmax(True), x, at=(normal(2, 5),))
    assert r.refuted and "given point" in r.refutation.point


def test_check_vjp_wants_a_custom_rule():
    with pytest.raises(TypeError, match="check_grad"):
        cj.check_vjp(lambda x: x, normal(3))


def test_fwd_disagreeing_with_the_primal_is_noted():
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x) + 1.0, x), lambda x, dy: (jnp.cos(x) * dy,))
    r = cj.check_vjp(f, normal(5))
    assert r.certified, repr(r)  # bwd is sin's VJP …
    assert any("fwd returns a primal output" in n for n in r.notes)  # … but fwd is wrong


# --------------------------------------------------------------- assert_vjp


def test_assert_vjp_passes_and_returns_the_report():
    r = assert_vjp(make_layernorm(False), *ln_args())
    assert r.certified


def test_assert_vjp_failure_message_names_input_element_gap_and_point():
    with pytest.raises(VjpAssertionError) as e:
        assert_vjp(make_embedding(True), normal(10, 4), IDS)
    msg = str(e.value)
    assert "is NOT the VJP" in msg
    assert "input `table[" in msg  # which input, which element
    assert "off by" in msg  # how far
    assert "at a seeded random point of scale" in msg  # at which point
    assert "refuted at your example arguments too" in msg
    assert e.value.report.refutation.name == "table"


def test_a_given_point_on_a_kink_is_undecided_and_assert_vjp_fails_on_it():
    # ReLU at exactly 0 has no derivative: one given point there decides nothing.
    relu = lambda x: jnp.maximum(x, 0.0)  # noqa: E731
    x = np.array([1.0, 0.0, -2.0], np.float32)
    r = cj.check_grad(relu, x, at="example", boundary_points=0)
    assert r.verdict == "undecided" and r.reason, repr(r)
    with pytest.raises(VjpAssertionError, match="could not decide"):
        assert_vjp(relu, x, at="example", boundary_points=0)
    assert assert_vjp(relu, x, at="example", boundary_points=0, allow_undecided=True).verdict == "undecided"


def make_scaled(bug):
    @jax.custom_vjp
    def scaled(x, scale):
        return x * scale

    def bwd(res, dy):
        x, scale = res
        return dy * scale, jnp.sum(dy) if bug else jnp.sum(dy * x)  # BUG: ∂/∂scale without x

    scaled.defvjp(lambda x, scale: (x * scale, (x, scale)), bwd)
    return scaled


def test_custom_vjp_called_with_a_keyword_argument():
    x = normal(5)
    assert cj.check_vjp(make_scaled(False), x, scale=np.float32(2.0)).certified
    r = cj.check_vjp(make_scaled(True), x, scale=np.float32(2.0))
    assert r.refuted and r.refutation.name == "scale", repr(r)
