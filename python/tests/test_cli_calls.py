"""certgrad.run / certify / render / check_vjp (StableHLO text) against
expectations derived without certgrad: numpy arithmetic, parameter counts
from the net's declaration and docs/conventions.md §15's signature, ln K for the
cross-entropy of all-zero logits, and SGD at lr 0 leaving θ unchanged."""

import math
import os
import re
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import certgrad

ROOT = Path(__file__).resolve().parents[2]

ADD_MUL = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>) {
  %s = stablehlo.add %a, %b : tensor<2x3xf32>
  %p = stablehlo.multiply %s, %a : tensor<2x3xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%p init: %z) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
  return %p, %r : tensor<2x3xf32>, tensor<3xf32>
}
"""


def test_run_text_returns_numpy_arrays():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 0.5, np.float32)
    p, r = certgrad.run(ADD_MUL, a, b)
    np.testing.assert_array_equal(p, (a + b) * a)
    np.testing.assert_array_equal(r, ((a + b) * a).sum(axis=0))
    assert p.dtype == np.float32 and r.shape == (3,)


def test_run_path_and_one_result(tmp_path):
    f = tmp_path / "neg.mlir"
    f.write_text(
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %y = stablehlo.negate %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n}\n"
    )
    y = certgrad.run(f, np.array([1, -2, 3, 0], np.float32))
    np.testing.assert_array_equal(y, [-1, 2, -3, 0])


def test_run_errors_name_the_place():
    with pytest.raises(certgrad.CertgradError, match=r"program\.mlir:2:"):
        certgrad.run("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = stablehlo.bogus %x\n}\n",
                     np.zeros(4, np.float32))
    with pytest.raises(certgrad.CertgradError, match="argument 0"):
        certgrad.run(ADD_MUL, np.zeros((3, 2), np.float32), np.zeros((2, 3), np.float32))


def _signature(text):
    head = re.search(r"func\.func public @\w+\((.*?)\)\s*->\s*\((.*?)\)\s*\{", text, re.S)
    types = lambda s: re.findall(r"tensor<([^>]*)>", s)  # noqa: E731
    return types(head[1]), types(head[2])


def _zeros(t):
    *dims, elem = t.split("x") if "x" in t else [t]
    assert elem == "f32", t
    return np.zeros([int(d) for d in dims], np.float32)


def test_render_cifar8_sgd_step_runs_with_the_reference_signature():
    text = certgrad.render("cifar8", "sgd", batch=2)
    ins, outs = _signature(text)
    assert (len(ins), len(outs)) == (71, 69)  # docs/conventions.md §15: every optimizer
    args = [_zeros(t) for t in ins]
    args[0] = np.random.default_rng(0).normal(size=args[0].shape).astype(np.float32)  # images
    theta = [np.full(a.shape, 0.0, np.float32) for a in args[1:23]]
    args[1:23] = theta
    onehot = np.zeros(args[-1].shape, np.float32)
    onehot[0, 3] = onehot[1, 7] = 1.0
    args[-1] = onehot
    # lr = 0 (the first scalar after θ, m, v): θ' = θ.
    res = certgrad.run(text, *args)
    for t, t2 in zip(theta, res[:22]):
        np.testing.assert_array_equal(t, t2)
    # All-zero weights give all-zero logits: cross-entropy ln K, K = 10.
    loss = res[66]
    assert loss.shape == () and abs(float(loss) - math.log(10)) < 1e-6


def test_certify_net_file_counts_and_verdict():
    cert = certgrad.certify(ROOT / "examples/nets/tiny.toml", batch=2)
    assert cert.certified and bool(cert)
    # conv 3→4 k3 +b: 112, BN 8, conv 4→8 k3 +b: 296, BN 16, dense 32→16: 528, dense 16→4: 68.
    assert (cert.parameter_tensors, cert.parameter_floats) == (12, 1028)
    assert cert.whole_net.verdict == "CERTIFIED" and cert.parameters.verdict == "CERTIFIED"
    assert "CERTIFIED" in repr(cert)


def test_certify_net_as_a_dict_is_the_same_net():
    tomllib = pytest.importorskip("tomllib")
    net = tomllib.loads((ROOT / "examples/nets/tiny.toml").read_text())
    cert = certgrad.certify(net, batch=2)
    assert (cert.parameter_tensors, cert.parameter_floats) == (12, 1028)


def test_check_vjp_on_text_pairs():
    fwd = """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %y = stablehlo.multiply %x, %x : tensor<3xf32>
  return %y : tensor<3xf32>
}"""
    good = """
func.func @main(%x: tensor<3xf32>, %dy: tensor<3xf32>) -> tensor<3xf32> {
  %two = stablehlo.constant dense<2.0> : tensor<3xf32>
  %t = stablehlo.multiply %two, %x : tensor<3xf32>
  %dx = stablehlo.multiply %t, %dy : tensor<3xf32>
  return %dx : tensor<3xf32>
}"""
    bad = good.replace("dense<2.0>", "dense<1.0>")  # d(x²)/dx = 2x, not x
    r = certgrad.check_vjp(fwd, good)
    assert r.certified and r.evidence == "exact", repr(r)
    r = certgrad.check_vjp(fwd, bad, names=["x"])
    assert r.refuted and r.refutation.name == "x"
    # At a given point the claimed entry is x·u, the truth 2x·u: claimed/true = 1/2.
    r = certgrad.check_vjp(fwd, bad, at=[np.array([1.0, 2.0, 3.0], np.float32)])
    assert r.refuted and r.given_point


@pytest.mark.skipif("CERTGRAD_BIN" in os.environ, reason="CERTGRAD_BIN overrides the wheel's binary")
def test_the_installed_wheel_carries_its_binary():
    # pip installs a bin-bindings wheel's executable into the scripts directory.
    assert Path(certgrad.binary()).parent == Path(sysconfig.get_path("scripts"))


def test_render_eval_takes_no_optimizer():
    text = certgrad.render("cifar8", eval=True, batch=2)
    assert "@cifar8_fwd_eval" in text, text[:200]
    # The eval forward has no optimizer: naming one is refused, not ignored.
    with pytest.raises(certgrad.CertgradError, match="cannot be used with"):
        certgrad.render("cifar8", "sgd", eval=True, batch=2)
