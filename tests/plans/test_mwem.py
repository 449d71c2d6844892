"""The MWEM family (one plan, `mwem`, registered as mwem, mwem_b, mwem_c and
mwem_d with the published choices) and the multiplicative-weights update it
relies on: budget spent exactly, research-mode determinism, accuracy against
the uniform estimate, no state, and the fast MW evaluation against a literal
reference loop. (Its NNLS inference, ``nnls(groups="columns")``, is tested in
tests/inference/test_columns.py.)"""

from __future__ import annotations

import importlib
import inspect
from fractions import Fraction

import numpy as np
import pytest

import ektelo
from ektelo import inference, plans
from ektelo import workload as wl
from ektelo.matrix import (
    Dense,
    EMatrix,
    Identity,
    Kronecker,
    Prefix,
    RangeQueries,
    Sparse,
    Total,
    VStack,
    Weighted,
)
from ektelo.measurement import Measurement

MWEM_PLANS = ["mwem", "mwem_b", "mwem_c", "mwem_d"]


def _skewed(n: int = 128, seed: int = 3) -> np.ndarray:
    """Counts with most mass in a few narrow bumps (a uniform estimate misses them)."""
    rng = np.random.default_rng(seed)
    x = rng.poisson(0.5, n)
    for centre in (n // 8, n // 2, 7 * n // 8):
        x[centre - 3 : centre + 3] += rng.poisson(400, 6)
    return x


# ---------------------------------------------------------------------------
# Budget
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", MWEM_PLANS)
@pytest.mark.parametrize("public_total", [True, False])
def test_plan_spends_exactly_eps(name: str, public_total: bool) -> None:
    x = _skewed(64)
    W = wl.random_range(64, 30, seed=1)
    eps = 0.7
    handle = ektelo.protect(x, epsilon=eps, seed=2)
    total = float(x.sum()) if public_total else None
    out = plans.run(name, handle, W, eps, rounds=6, total=total)
    assert out.shape == (64,) and np.all(np.isfinite(out)) and np.all(out >= 0)
    assert handle.budget.spent == pytest.approx(eps, rel=1e-12)
    # The ledger (exact fractions) books ε on the root, up to its documented
    # 1e-9 slack; every request is on the root vector.
    (root,) = [s for s in handle.ledger() if s.parent is None]
    assert abs(root.spent - Fraction(eps)) <= Fraction(eps) * Fraction(1, 10**9)
    history = handle.history()
    selections = [r for r in history if r.operation.endswith("worst_approx")]
    laplaces = [r for r in history if r.operation == "laplace"]
    assert len(selections) == 6
    assert len(laplaces) == 6 + (0 if public_total else 1)
    total_booked = sum((Fraction(r.charged_at_root) for r in history), Fraction(0))
    assert abs(total_booked - Fraction(eps)) <= Fraction(eps) * Fraction(1, 10**9)


@pytest.mark.parametrize("name", MWEM_PLANS)
def test_budget_split_per_round(name: str) -> None:
    x = _skewed(32)
    handle = ektelo.protect(x, epsilon=1.0, seed=4)
    plans.run(name, handle, wl.prefix(32), 1.0, rounds=4, ratio=0.25, total=float(x.sum()))
    history = handle.history()
    for r in history:
        share = 0.25 if r.operation.endswith("worst_approx") else 0.75
        assert r.eps == pytest.approx(share / 4, rel=1e-12)


# ---------------------------------------------------------------------------
# Determinism, state, accuracy
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", MWEM_PLANS)
def test_research_mode_is_deterministic_and_plans_hold_no_state(name: str) -> None:
    x = _skewed(64)
    W = wl.random_range(64, 25, seed=6)
    first = plans.run(name, ektelo.protect(x, epsilon=0.5, seed=9), W, 0.5)
    # another run on other data in between must not leak into the next one
    plans.run(name, ektelo.protect(x[::-1].copy(), epsilon=0.5, seed=1), W, 0.5)
    again = plans.run(name, ektelo.protect(x, epsilon=0.5, seed=9), W, 0.5)
    np.testing.assert_array_equal(first, again)
    other_seed = plans.run(name, ektelo.protect(x, epsilon=0.5, seed=10), W, 0.5)
    assert not np.array_equal(first, other_seed)


def test_plan_module_has_no_mutable_state() -> None:
    module = importlib.import_module("ektelo.plans.mwem")
    for key, value in vars(module).items():
        if not key.startswith("__"):
            assert not isinstance(value, (list, dict, set, np.ndarray)), key
    for name in MWEM_PLANS:
        fn = getattr(module, name)
        assert not getattr(fn, "func", fn).__closure__
        for p in inspect.signature(fn).parameters.values():
            assert not isinstance(p.default, (list, dict, set, np.ndarray)), (name, p.name)


@pytest.mark.parametrize(
    ("name", "choices"),
    [("mwem", {"select": "worst", "infer": "mw", "passes": 100}),
     ("mwem_b", {"select": "augmented", "infer": "mw", "passes": 50}),
     ("mwem_c", {"select": "worst", "infer": "nnls"}),
     ("mwem_d", {"select": "augmented", "infer": "nnls"})],
)  # fmt: skip
def test_the_variants_are_mwem_with_the_published_choices(name: str, choices: dict) -> None:
    """§9.1: (b) augmented selection, (c) NNLS inference, (d) both — one plan,
    registered under four names; each name runs what `mwem` runs with its
    choices (the same random bits, the same estimate)."""
    info = plans.get(name)
    assert getattr(info.function, "func", info.function) is plans.mwem
    assert {k: info.parameters[k] for k in choices} == choices
    assert info.data_dependent and info.citation and "Budget" in (info.function.__doc__ or "")
    x = _skewed(64)
    W = wl.random_range(64, 20, seed=4)
    by_name = plans.run(name, ektelo.protect(x, epsilon=1.0, seed=2), W, 1.0, rounds=3)
    direct = plans.mwem(ektelo.protect(x, epsilon=1.0, seed=2), W, 1.0, rounds=3, **choices)
    np.testing.assert_array_equal(by_name, direct)


@pytest.mark.parametrize("bad", [{"select": "best"}, {"infer": "ls"}, {"select": None}])
def test_unknown_operator_choices_are_refused_before_spending(bad: dict) -> None:
    x = ektelo.protect(_skewed(32), epsilon=1.0, seed=1)
    with pytest.raises(ValueError, match=next(iter(bad))):
        plans.mwem(x, wl.prefix(32), 1.0, **bad)
    assert x.budget.spent == 0


@pytest.mark.parametrize("name", MWEM_PLANS)
def test_inputs_are_not_modified(name: str) -> None:
    x = _skewed(32)
    W = wl.random_range(32, 10, seed=2)
    lower, upper = W.lower.copy(), W.upper.copy()
    plans.run(name, ektelo.protect(x, epsilon=1.0, seed=1), W, 1.0, rounds=3)
    np.testing.assert_array_equal(W.lower, lower)
    np.testing.assert_array_equal(W.upper, upper)


@pytest.mark.parametrize("name", MWEM_PLANS)
def test_improves_on_the_uniform_estimate_on_skewed_data(name: str) -> None:
    x = _skewed(128)
    W = wl.random_range(128, 60, seed=5)
    uniform = np.full(x.size, x.sum() / x.size)
    base = wl.scaled_l2_error(W, x, uniform)
    errors = [
        wl.scaled_l2_error(
            W, x, plans.run(name, ektelo.protect(x, epsilon=1.0, seed=s), W, 1.0,
                            total=float(x.sum()))
        )
        for s in range(4)
    ]  # fmt: skip
    assert np.mean(errors) < 0.5 * base


def test_augmented_selection_adds_free_disjoint_queries() -> None:
    """mwem_b measures many more (disjoint) queries than MWEM, at the same cost."""
    x = _skewed(64)
    W = wl.random_range(64, 20, seed=3)
    rows = {}
    for name in ("mwem", "mwem_b"):
        handle = ektelo.protect(x, epsilon=1.0, seed=3)
        plans.run(name, handle, W, 1.0, rounds=3, total=float(x.sum()))
        laplaces = [r for r in handle.history() if r.operation == "laplace"]
        assert all(r.sensitivity == 1.0 for r in laplaces)  # disjoint rows
        rows[name] = sum(int(r.query.split("(")[1].split("x")[0]) for r in laplaces)
        assert handle.budget.spent == pytest.approx(1.0)
    assert rows["mwem"] == 3
    assert rows["mwem_b"] > 10  # e.g. round 1 adds the unit ranges outside the pick


@pytest.mark.parametrize("name", MWEM_PLANS)
def test_two_dimensional_domain(name: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.poisson(2.0, (12, 10))
    x[2:5, 3:7] += 40
    W = wl.random_range((12, 10), 15, seed=2)
    handle = ektelo.protect(x, epsilon=1.0, seed=3)
    out = plans.run(name, handle, W, 1.0, rounds=4, total=float(x.sum()))
    assert out.shape == (120,) and np.all(np.isfinite(out))
    assert handle.budget.spent == pytest.approx(1.0)
    assert out.sum() == pytest.approx(x.sum(), rel=1e-3)


# ---------------------------------------------------------------------------
# Workload-based reduction (§8)
# ---------------------------------------------------------------------------
def _grouped_workload(shape: tuple[int, ...]) -> tuple[np.ndarray, EMatrix]:
    """Skewed counts and ranges that leave cells indistinguishable in groups
    (one non-contiguous: the cells covered by the first range only)."""
    x = _skewed(int(np.prod(shape)))
    n = x.size
    lo = np.array([0, n // 4, n // 2, n // 2, 3 * n // 4 + 1])
    hi = np.array([n - 1, n // 2 - 1, 3 * n // 4, n // 2 + 7, n - 3])
    return x.reshape(shape), wl.range_queries(n, lo[:, None], hi[:, None])


@pytest.mark.parametrize("name", ["mwem", "mwem_c"])
@pytest.mark.parametrize("public_total", [True, False])
def test_workload_reduction_is_lossless_for_mwem_and_mwem_c(name: str, public_total: bool) -> None:
    """Prop. 1: on the groups the scores, the noise and the fits are those on
    the cells, so with the same random bits the estimate is the same."""
    x, W = _grouped_workload((128,))
    total = float(x.sum()) if public_total else None
    out = {}
    for reduced in (False, True):
        handle = ektelo.protect(x, epsilon=1.0, seed=5)
        out[reduced] = plans.run(name, handle, W, 1.0, rounds=4, total=total,
                                 workload_reduction=reduced)  # fmt: skip
        assert handle.budget.spent == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(out[True], out[False], rtol=1e-9, atol=1e-9 * x.sum())


@pytest.mark.parametrize("name", MWEM_PLANS)
def test_workload_reduction_estimates_are_uniform_on_the_groups(name: str) -> None:
    from ektelo.operators.partition import workload_based

    x, W = _grouped_workload((8, 16))
    handle = ektelo.protect(x, epsilon=1.0, seed=6)
    out = plans.run(name, handle, W, 1.0, rounds=5, total=float(x.sum()), workload_reduction=True)
    assert out.shape == (128,) and np.all(out >= 0)
    assert handle.budget.spent == pytest.approx(1.0, rel=1e-12)
    P = workload_based(W)
    np.testing.assert_allclose(out, P.expand(P.reduce(out)), rtol=1e-12, atol=1e-12)
    assert out.sum() == pytest.approx(x.sum(), rel=1e-6)


def test_workload_reduction_draws_the_free_ranges_over_the_groups() -> None:
    """mwem_b on the groups measures dyadic ranges of groups: every measured
    query is constant on each group (on the cells it would split them)."""
    from ektelo.operators.partition import workload_based

    x, W = _grouped_workload((128,))
    P = workload_based(W)
    seen: list[np.ndarray] = []
    real = inference.multiplicative_weights

    def spy(measurements, **kw):
        seen.extend(m.query.dense() for m in measurements[len(seen) :])
        return real(measurements, **kw)

    module = importlib.import_module("ektelo.plans.mwem")
    original = module.inference.multiplicative_weights
    module.inference.multiplicative_weights = spy
    try:
        handle = ektelo.protect(x, epsilon=1.0, seed=7)
        plans.mwem_b(handle, W, 1.0, rounds=3, total=float(x.sum()), workload_reduction=True)
    finally:
        module.inference.multiplicative_weights = original
    assert len(seen) == 3 and all(Q.shape[1] == P.num_groups for Q in seen)
    assert sum(Q.shape[0] for Q in seen) > 3  # the free dyadic ranges came along


@pytest.mark.parametrize("name", ["mwem", "mwem_b"])
@pytest.mark.parametrize("bad", [{"rounds": 0}, {"rounds": 2.5}, {"total": -3.0},
                                 {"total": float("nan")}, {"passes": 0}, {"passes": 2.0},
                                 {"passes": True}])  # fmt: skip
def test_bad_hyper_parameters_are_refused_before_spending(name: str, bad: dict) -> None:
    x = ektelo.protect(_skewed(32), epsilon=1.0, seed=1)
    with pytest.raises((ValueError, TypeError)):
        plans.run(name, x, wl.prefix(32), 1.0, **bad)
    assert x.budget.spent == 0


@pytest.mark.parametrize("name", MWEM_PLANS)
@pytest.mark.parametrize(
    "bad",
    [{"rounds": 10**8}, {"rounds": 1e8}, {"rounds": 1001}, {"rounds": np.int64(10**8)},
     {"rounds": 10.0}, {"ratio": 1.5}, {"ratio": 0}, {"ratio": float("nan")}, {"ratio": "0.5"},
     {"total_ratio": 1.0}, {"workload_reduction": "yes"}],
)  # fmt: skip
def test_absurd_hyper_parameters_are_refused_up_front(name: str, bad: dict) -> None:
    """`--param rounds=100000000` used to run for hours (after buying the
    total); a bad `ratio` was refused only after the total was bought."""
    x = ektelo.protect(np.arange(32), epsilon=1.0, seed=1)
    with pytest.raises((ValueError, TypeError)) as err:
        plans.run(name, x, wl.prefix(32), 1.0, **bad)
    assert next(iter(bad)) in str(err.value)
    assert x.budget.spent == 0


@pytest.mark.parametrize("name", ["mwem", "mwem_b"])
@pytest.mark.parametrize("passes", [10**8, 1e8, 1001])
def test_absurd_passes_are_refused_up_front(name: str, passes: object) -> None:
    x = ektelo.protect(np.arange(32), epsilon=1.0, seed=1)
    with pytest.raises(ValueError, match=r"passes must be an integer in 1\.\.1,000"):
        plans.run(name, x, wl.prefix(32), 1.0, passes=passes)
    assert x.budget.spent == 0


def test_iteration_limits_are_accepted_at_the_cap() -> None:
    """The caps are inclusive (checked with a public total and one round)."""
    from ektelo.plans.mwem import MAX_PASSES, MAX_ROUNDS

    assert MAX_ROUNDS == MAX_PASSES == 1000
    x = np.arange(16)
    handle = ektelo.protect(x, epsilon=1.0, seed=1)
    plans.run("mwem", handle, wl.prefix(16), 1.0, rounds=1, passes=MAX_PASSES,
              total=float(x.sum()))  # fmt: skip
    assert handle.budget.spent == pytest.approx(1.0)


@pytest.mark.parametrize(("name", "default"), [("mwem", 100), ("mwem_b", 50)])
def test_mw_passes_per_round_default_to_the_published_ones(
    name: str, default: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DPBench's MWEM cycles its measurements 100 times per round, εktelo's
    MwemVariantB 50 times; `passes` overrides either."""
    module = importlib.import_module("ektelo.plans.mwem")
    original = module.inference.multiplicative_weights
    seen: list[int] = []

    def spy(measurements: list, **kwargs: object) -> inference.Estimate:
        seen.append(int(kwargs["maxiter"]))  # type: ignore[call-overload]
        return original(measurements, **kwargs)

    monkeypatch.setattr(module.inference, "multiplicative_weights", spy)
    x = _skewed(64)
    for passes in (None, 7):
        handle = ektelo.protect(x, epsilon=1.0, seed=3)
        extra = {} if passes is None else {"passes": passes}
        plans.run(name, handle, wl.prefix(64), 1.0, rounds=2, total=float(x.sum()), **extra)
        assert seen == [passes or default] * 2
        seen.clear()


# ---------------------------------------------------------------------------
# The multiplicative-weights update against a literal loop
# ---------------------------------------------------------------------------
def _literal_mw(ms: list[Measurement], T: float, x0: np.ndarray, passes: int) -> np.ndarray:
    """Hardt et al.'s update, one dense query at a time, normalised after each."""
    scales = np.array([m.noise_scale for m in ms])
    unit = scales[scales > 0].min()
    x = x0 * T / x0.sum()
    for _ in range(passes):
        for m in ms:
            w = unit / m.noise_scale
            for q, a in zip(m.query_on_root.dense(), m.answers, strict=True):
                x = x * np.exp(np.clip(w * q * (a - q @ x) / (2 * T), -700, 700))
                x *= T / x.sum()
    return x


def _measure(Q: EMatrix, x: np.ndarray, b: float, rng: np.random.Generator) -> Measurement:
    y = Q.matvec(x.reshape(-1)) + rng.laplace(0.0, b, Q.shape[0])
    return Measurement(y, Q, Q, b, 1.0, "root", tuple(x.shape))


def _dyadic(n: int, length: int, skip: tuple[int, int]) -> RangeQueries:
    lo = np.arange(0, n, length)
    hi = np.minimum(lo + length, n) - 1
    keep = (hi < skip[0]) | (lo > skip[1])
    return RangeQueries(n, lo[keep], hi[keep])


def test_mw_matches_literal_loop_on_augmented_measurements() -> None:
    """Blocks of many disjoint rows (the vectorised path) as mwem_b measures them."""
    rng = np.random.default_rng(0)
    n = 96
    x = rng.poisson(3, n)
    x[10:20] = 0  # zero cells stay zero
    x[40:44] += 200
    ms = []
    for k, (a, b) in enumerate([(5, 30), (50, 60), (0, 3), (70, 95)], start=1):
        chosen = RangeQueries(n, [a], [b])
        ms.append(_measure(VStack([chosen, _dyadic(n, 2 ** (k - 1), (a, b))]), x, 4.0, rng))
    x0 = rng.random(n) + 0.05
    T = float(x.sum())
    est = inference.multiplicative_weights(ms, total=T, start=x0, maxiter=9).x.reshape(-1)
    ref = _literal_mw(ms, T, x0, 9)
    np.testing.assert_allclose(est, ref, rtol=1e-9, atol=1e-9 * T)


@pytest.mark.parametrize("scratch_rows", [1 << 18, 0])
def test_mw_matches_literal_loop_over_many_passes(scratch_rows: int, monkeypatch) -> None:
    """Enough passes for the blocks' first guesses to extrapolate the last
    passes' masses (polynomials up to order 5), and for the huge-block path
    (no kept scratch, the last masses only): the literal loop's result."""
    # a size threshold (private): which blocks keep their scratch and history
    monkeypatch.setattr("ektelo.inference._mw_passes._SCRATCH_ROWS", scratch_rows)
    rng = np.random.default_rng(4)
    n = 256
    x = rng.poisson(2, n)
    x[100:140] += rng.poisson(60, 40)
    ms = []
    for k, (a, b) in enumerate([(10, 200), (0, 40), (150, 255), (30, 90)], start=1):
        chosen = RangeQueries(n, [a], [b])
        ms.append(_measure(VStack([chosen, _dyadic(n, 2 ** (k - 1), (a, b))]), x, 3.0, rng))
    x0 = rng.random(n) + 0.05
    T = float(x.sum())
    est = inference.multiplicative_weights(ms, total=T, start=x0, maxiter=40).x.reshape(-1)
    np.testing.assert_allclose(est, _literal_mw(ms, T, x0, 40), rtol=1e-9, atol=1e-9 * T)


def test_mw_matches_literal_loop_on_mixed_queries() -> None:
    """Every kind of row: ranges, unit rows, totals, weighted ranges, dense
    rows, prefixes (overlapping), and unequal noise scales."""
    rng = np.random.default_rng(1)
    n = 40
    x = rng.poisson(6, n)
    queries = [
        (wl.random_range(n, 7, seed=3), 2.0),
        (Identity(n), 2.0),
        (Total(n), 1.0),
        (Weighted(RangeQueries(n, np.arange(0, n, 4), np.arange(3, n, 4)), 2.0), 3.0),
        (Dense(rng.random((3, n))), 2.0),
        (Prefix(n), 8.0),
        (Sparse(np.eye(n)[::5] * 1.5), 2.0),
    ]
    ms = [_measure(Q, x, b, rng) for Q, b in queries]
    x0 = rng.random(n) + 0.1
    T = float(x.sum())
    est = inference.multiplicative_weights(ms, total=T, start=x0, maxiter=6).x.reshape(-1)
    np.testing.assert_allclose(est, _literal_mw(ms, T, x0, 6), rtol=1e-9, atol=1e-9 * T)


def test_mw_matches_literal_loop_on_boxes() -> None:
    rng = np.random.default_rng(2)
    shape = (9, 11)
    x = rng.poisson(4, shape)
    W = RangeQueries(shape, [[0, 0], [2, 3], [5, 5], [0, 10]], [[3, 4], [7, 8], [8, 10], [8, 10]])
    ms = [
        _measure(W, x, 2.0, rng),
        _measure(Kronecker([Identity(9), Total(11)]), x, 2.0, rng),
        _measure(Identity(99), x, 2.0, rng),
    ]
    T = float(x.sum())
    est = inference.multiplicative_weights(ms, total=T, maxiter=5).x.reshape(-1)
    ref = _literal_mw(ms, T, np.ones(99), 5)
    np.testing.assert_allclose(est, ref, rtol=1e-9, atol=1e-9 * T)


def test_mw_survives_absurd_noise_like_the_literal_loop() -> None:
    """Answers far beyond the total clip exponents; the blocked evaluation
    falls back to the literal loop and still agrees with it."""
    n = 30
    x = np.arange(n, dtype=float)
    Q = Identity(n)
    answers = np.where(np.arange(n) % 2 == 0, 1e6, -1e6)
    m = Measurement(answers, Q, Q, 1.0, 1.0, "root", (n,))
    T = float(x.sum())
    est = inference.multiplicative_weights([m], total=T, maxiter=3).x.reshape(-1)
    np.testing.assert_allclose(est, _literal_mw([m], T, np.ones(n), 3), rtol=1e-9, atol=1e-9 * T)
    assert est.sum() == pytest.approx(T)
