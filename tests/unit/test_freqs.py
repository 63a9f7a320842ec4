"""Key frequencies of a W_E (tuimon.freqs): synthetic embeddings with known frequencies."""

from __future__ import annotations

import numpy as np
import pytest

from tuimon.freqs import FreqError, agreement, as_embedding, energies, key_frequencies

P, D = 113, 128
KNOWN = {14: 5.0, 35: 4.0, 41: 3.0, 42: 2.0, 52: 1.0}  # k -> amplitude, in rank order


def synthetic(freqs: dict[int, float], p: int = P, d: int = D, seed: int = 0) -> np.ndarray:
    """(d, p) W_E whose columns over the residues hold exactly these frequencies."""
    rng = np.random.default_rng(seed)
    n = np.arange(p)
    w = np.zeros((d, p))
    for k, amp in freqs.items():
        direction = rng.normal(size=d)
        direction *= amp / np.linalg.norm(direction)
        w += np.outer(direction, np.cos(2 * np.pi * k * n / p + rng.uniform(0, 2 * np.pi)))
    return w


def four_layouts(w: np.ndarray) -> dict[str, np.ndarray]:
    eq = np.random.default_rng(9).normal(size=(w.shape[0], 1)) * 10  # a loud '=' column
    with_eq = np.concatenate([w, eq], axis=1)
    return {"d,p": w, "d,p+1": with_eq, "p,d": w.T.copy(), "p+1,d": with_eq.T.copy()}


@pytest.mark.parametrize("layout", ["d,p", "d,p+1", "p,d", "p+1,d"])
def test_known_frequencies_in_all_four_layouts(layout: str) -> None:
    w = four_layouts(synthetic(KNOWN).astype(np.float32))[layout]
    found = key_frequencies(w)
    assert found.freqs == tuple(KNOWN)  # exactly those, in order of energy
    total = sum(a * a for a in KNOWN.values())
    expected = [a * a / total for a in KNOWN.values()]
    assert found.shares == pytest.approx(expected, rel=1e-4)
    assert found.constant_share == pytest.approx(0, abs=1e-9)
    emb = found.embedding
    assert emb.p == P and emb.matrix.shape == (D, P)
    assert emb.eq_column == ("+1" in layout)
    assert emb.layout == ("d_model-first" if layout.startswith("d") else "residues-first")


def test_shares_and_constant_add_up_to_one() -> None:
    w = np.random.default_rng(1).normal(size=(D, P + 1))
    found = key_frequencies(w, top=P // 2)
    assert sorted(found.freqs) == list(range(1, P // 2 + 1))
    assert sum(found.shares) + found.constant_share == pytest.approx(1.0)
    m = as_embedding(w).matrix
    assert energies(m).sum() == pytest.approx(float((m * m).sum()))  # Parseval


def test_sine_and_cosine_of_one_k_combine() -> None:
    n = np.arange(P)
    w = np.zeros((D, P))
    w[0] = np.cos(2 * np.pi * 7 * n / P)
    w[1] = np.sin(2 * np.pi * 7 * n / P)
    w[2] = 0.9 * np.cos(2 * np.pi * 8 * n / P)  # larger than either row of k=7 alone? no: 0.81
    found = key_frequencies(w, top=2)
    assert found.freqs == (7, 8)
    assert found.shares[0] == pytest.approx(2 / 2.81)


def test_even_p_with_explicit_p() -> None:
    p = 12
    w = synthetic({3: 2.0, 6: 1.0}, p=p, d=16)  # 6 = p/2: the cosine alone
    found = key_frequencies(w, top=2, p=p, d_model=16)
    assert found.freqs == (3, 6) and found.embedding.p == p
    assert sum(found.shares) == pytest.approx(1.0)


def test_explicit_layout_and_p_resolve_ambiguity() -> None:
    w = synthetic({5: 1.0, 9: 0.5}, p=31, d=40)
    with pytest.raises(FreqError, match="no axis of length d_model=128"):
        key_frequencies(w)
    assert key_frequencies(w, top=2, p=31).freqs == (5, 9)
    assert key_frequencies(w.T, top=2, layout="residues-first").freqs == (5, 9)
    assert key_frequencies(w, top=2, d_model=40).freqs == (5, 9)
    square = synthetic({5: 1.0}, p=31, d=31)  # (31, 31)
    with pytest.raises(FreqError, match="both axes fit p=31"):
        key_frequencies(square, p=31)


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.array([["a", "b"], ["c", "d"]]), "not a numeric array"),
        (np.zeros((D, P + 1, 2)), "2-dimensional"),
        (np.zeros((D, P + 1)), "all zeros"),
        (np.full((D, P), np.nan), "NaN"),
        (np.ones((D, D)), "both axes are 128 long"),
    ],
)
def test_bad_arrays_are_clear_errors(array: np.ndarray, message: str) -> None:
    with pytest.raises(FreqError, match=message):
        key_frequencies(array)


def test_agreement_is_about_sets() -> None:
    a = key_frequencies(synthetic(KNOWN))
    swapped = key_frequencies(synthetic({14: 4.0, 35: 5.0, 41: 3.0, 42: 2.0, 52: 1.0}))
    other = key_frequencies(synthetic({14: 5.0, 35: 4.0, 41: 3.0, 42: 2.0, 17: 1.0}))
    same = {"agree": True, "same_order": False, "common": [14, 35, 41, 42, 52]}
    assert agreement(a, swapped) == {**same, "only_a": [], "only_b": []}
    result = agreement(a, other)
    assert result["agree"] is False and result["only_a"] == [52] and result["only_b"] == [17]
