"""certgrad.jax.certify_step on train steps written the way JAX users write
them: value_and_grad of a mean cross-entropy with integer labels, an
accuracy beside the loss, parameters in a dict, an SGD or Adam update by
hand. The correct step must be CERTIFIED with its parameters named by their
pytree paths; the same step whose ReLU has a custom_vjp rule with the wrong
mask must be REFUTED at a parameter the rule feeds, with the place its
backward goes wrong.

Which step is right is known from the mathematics (ReLU's derivative is the
indicator of x > 0), never from certgrad's own output.
"""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import certgrad.jax as cj  # noqa: E402

RNG = np.random.default_rng(23)


def relu_with_mask(threshold):
    @jax.custom_vjp
    def relu(x):
        return jnp.maximum(x, 0.0)

    def fwd(x):
        return relu(x), x

    def bwd(x, g):
        return (jnp.where(x > threshold, g, 0.0),)

    relu.defvjp(fwd, bwd)
    return relu


def make_step(relu, optimizer="sgd"):
    def loss_fn(params, x, y):
        h = relu(x @ params["dense1"]["w"] + params["dense1"]["b"])
        logits = h @ params["dense2"]["w"] + params["dense2"]["b"]
        logp = jax.nn.log_softmax(logits)
        loss = -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))
        return loss, logits

    def sgd_step(params, x, y):
        (loss, logits), g = jax.value_and_grad(loss_fn, has_aux=True)(params, x, y)
        acc = jnp.mean(jnp.argmax(logits, -1) == y)
        new = jax.tree_util.tree_map(lambda p, d: p - 0.05 * d, params, g)
        return new, {"loss": loss, "accuracy": acc}

    def adam_step(params, m, v, count, x, y):
        (loss, _), g = jax.value_and_grad(loss_fn, has_aux=True)(params, x, y)
        m = jax.tree_util.tree_map(lambda m, d: 0.9 * m + 0.1 * d, m, g)
        v = jax.tree_util.tree_map(lambda v, d: 0.999 * v + 0.001 * d * d, v, g)
        t = (count + 1).astype(jnp.float32)
        c1, c2 = 1 - 0.9**t, 1 - 0.999**t
        new = jax.tree_util.tree_map(lambda p, m, v: p - 1e-3 * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), params, m, v)
        return new, m, v, count + 1, loss

    return sgd_step if optimizer == "sgd" else adam_step


def example():
    params = {
        "dense1": {"w": RNG.normal(size=(6, 8)).astype(np.float32) / 2, "b": np.zeros(8, np.float32)},
        "dense2": {"w": RNG.normal(size=(8, 3)).astype(np.float32) / 3, "b": np.zeros(3, np.float32)},
    }
    x = RNG.normal(size=(5, 6)).astype(np.float32)
    y = RNG.integers(0, 3, size=5).astype(np.int32)
    return params, x, y


def test_a_correct_sgd_step_is_certified_with_its_parameters_named_by_path():
    params, x, y = example()
    r = cj.certify_step(make_step(relu_with_mask(0.0)), params, x, y)
    assert r.certified, r.table
    names = sorted(row["name"] for row in r.rows)
    assert names == sorted(
        ["params['dense1']['w']", "params['dense1']['b']", "params['dense2']['w']", "params['dense2']['b']"]
    ), names
    assert r.tail.startswith("SGD, lr 5.000000e-2"), r.tail
    assert abs(r.scale - 1.0) < 1e-9, r.scale


def test_a_hand_written_adam_step_is_certified_and_its_learning_rate_read_back():
    params, x, y = example()
    zeros = jax.tree_util.tree_map(np.zeros_like, params)
    step = make_step(relu_with_mask(0.0), "adam")
    r = cj.certify_step(step, params, zeros, zeros, np.int32(0), x, y)
    assert r.certified, r.table
    assert "lr 1.000000e-3, ε 1.0e-8" in r.tail, r.tail


def test_a_wrong_custom_vjp_inside_the_step_is_refuted_and_localised():
    params, x, y = example()
    r = cj.certify_step(make_step(relu_with_mask(0.5)), params, x, y)
    assert r.refuted, r.table
    wrong = sorted(row["name"] for row in r.rows if row["status"].startswith("WRONG"))
    # The rule feeds the first layer's gradients only.
    assert wrong == ["params['dense1']['b']", "params['dense1']['w']"], r.table
    assert r.localisation is not None, r.table
    assert "goes wrong at" in r.table, r.table
