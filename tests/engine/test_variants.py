"""Every run says which variant of its protocol ran how many steps."""

import pytest

import tokendist as td
from tokendist.engine import PROTOCOLS
from tokendist.kernels._report import REFERENCE, describe_kernel


@pytest.mark.parametrize("name", [n for n, c in PROTOCOLS.items() if c.model != "message"])
def test_variant_counts_add_up_to_the_steps(name):
    cls = PROTOCOLS.get(name)
    spec = "kary:2,3" if ("tree" in cls.requires or "colouring" in cls.requires or cls.name.startswith(("threshold", "discrepancy"))) else "torus:6x6"
    r = td.simulate(spec, name, "random:0..30", seed=3, max_steps=12, allow_infeasible=cls.may_go_negative)
    assert sum(r.variants.values()) == r.steps
    assert r.to_json()["variants"] == r.variants


def test_the_reported_variant_is_the_one_the_parameters_choose():
    # kernel=numba named: left to its defaults, a run this small may take the reference instead of compiling.
    torus = td.simulate("torus:8x8", "multi-port", "random:0..50", seed=1, max_steps=5, until_discrepancy=0,
                        params={"kernel": "numba"})
    assert list(torus.variants) == ["stencil, serial (multi_port_step_stencil)"]
    numpy = td.simulate("torus:8x8", "multi-port", "random:0..50", seed=1, max_steps=5, params={"kernel": "numpy"})
    assert numpy.variants == {REFERENCE: numpy.steps}
    assert (numpy.loads == td.simulate("torus:8x8", "multi-port", "random:0..50", seed=1, max_steps=5).loads).all()
    tree = td.simulate("random-tree:20", "multi-port", "random:0..50", seed=1, max_steps=5, params={"kernel": "numba"})
    assert all(v.startswith(("csr", "regular rows")) for v in tree.variants)


def test_kernel_descriptions():
    assert describe_kernel("x.kernels._threaded", "sos_iou_step_par") == "csr, threaded (sos_iou_step_par)"
    assert describe_kernel("x.kernels._sos_cube", "sos_iou_cube") == "cube, serial (sos_iou_cube)"
    assert describe_kernel("x.kernels._serial", "colour_step_numpy") == "numpy (colour_step_numpy)"
