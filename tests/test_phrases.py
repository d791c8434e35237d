"""The grader's one list of phrases against the misnamings measured on graded pages
(a mistake named for answers that had not made it): each look-alike gets the measured
relation, never a cause the evidence does not decide."""

from __future__ import annotations

import pytest

from autograder.trusted.phrases import PHRASES, is_phrase
from autograder.trusted.raised import MESSAGES
from autograder.trusted.relations import relate

import scenario_support as support

# What the graded pages said of answers that had not made that mistake.
MISNAMINGS = ["off by one", "state kept between calls", "the result ignores the argument",
              "a dimension summed away", "is the result hard-coded", "hard-coded",
              "the same value counted for every name", "a mask not applied everywhere",
              "retain_grad() came after backward()"]


def _every_text() -> list[str]:
    texts = [text for p in PHRASES.values() for text in (p.text, p.advice) if text]
    return texts + [text for _, fact, advice in MESSAGES for text in (fact, advice) if text]


@pytest.mark.parametrize("words", MISNAMINGS)
def test_no_phrase_says_a_cause_the_issue_found_misnamed(words):
    assert not any(words.lower() in text.lower() for text in _every_text())
    assert not is_phrase(words) and not is_phrase(f"x.grad: {words}")


def test_every_phrase_states_the_evidence_it_needs():
    for key, phrase in PHRASES.items():
        assert phrase.evidence.strip(), key
        assert phrase.evidence != phrase.text, key


def test_len_where_numel_was_asked_is_said_as_the_values_measured():
    """len(p) for p.numel(): the dict's entries are compared one by one; "every entry is the
    same" is said only when the found entries are all equal, never as a cause."""
    expected = {"a.weight": 12, "a.bias": 4, "b.weight": 8, "b.bias": 2}
    fact, hint = relate(expected, {"a.weight": 4, "a.bias": 4, "b.weight": 2, "b.bias": 2},
                        0, 0, "sizes", False)
    assert is_phrase(fact) and hint is None
    assert "every entry is the same" not in fact
    fact, hint = relate(expected, {name: 2 for name in expected}, 0, 0, "sizes", False)
    assert fact == "sizes: every entry is the same, where the expected ones differ"
    assert hint is None


def test_a_count_of_zero_against_one_and_a_symmetric_count_are_said_as_counts():
    for expected, found in ((1, 0), (0, 1), (4, 5), ([2, 2], [3, 3])):
        fact, hint = relate(expected, found, 0, 0, "backward() calls", False)
        assert fact and is_phrase(fact) and hint is None, (expected, found, fact)
        assert "off by one" not in fact


def test_all_zero_expectations_are_said_as_zeros_not_as_a_mask():
    import torch

    from autograder.trusted.outcomes import read_outcome
    from coursekit.scenarios import encode

    def tensor(values):
        return read_outcome({"observations": {"v": encode(torch.tensor(values))}}
                            ).observations["v"]

    fact, hint = relate(tensor([0.0, 0.0, 0.0]), tensor([1.0, 0.0, 2.0]), 1e-5, 1e-6,
                        "q.grad when every p is 0", False)
    assert fact == "q.grad when every p is 0 should be all zeros; 2 of its 3 entries are not"
    assert hint is None


def test_retain_grad_before_backward_off_the_loss_path_is_not_told_it_came_after():
    """h.retain_grad() called before backward(), but L recomputed from x: h.grad stays None.
    The page must not claim retain_grad() came after backward()."""
    source = '''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    h.retain_grad()
    ((x * x) ** 3).sum().backward()
    return h.grad
'''
    namespace = support.variant_namespace("02_retain_grad", "02-ex1", source)
    failed = [c for c in support.verdict("02_retain_grad", "02-ex1", namespace) if not c.passed]
    assert failed
    said = " ".join([c.mistake or "" for c in failed] + [r for c in failed for r in c.relations]
                    + [h for c in failed for h in c.hints])
    assert "came after" not in said and "after backward()" not in said.replace(
        "before backward()", "")


def _read(value):
    from autograder.trusted.outcomes import read_outcome
    from coursekit.scenarios import encode
    return read_outcome({"observations": {"v": encode(value)}}).observations["v"]


def test_a_list_where_a_tensor_was_expected_gets_advice_that_fits_its_items():
    """Blind round: h.grad.tolist() and a 1-tuple from vjp_fn(v) were told "torch.stack the
    items", which raises on floats and gives shape (1, n) for the 1-tuple."""
    import torch

    expected = _read(torch.tensor([3.0, 48.0, 0.1875]))
    fact, hint = relate(expected, _read([3.0, 48.0, 0.1875]), 1e-5, 1e-6, "h.grad", False)
    assert "right numbers" in fact and "torch.stack" not in (hint or "") and is_phrase(fact)
    fact, hint = relate(expected, _read((torch.tensor([3.0, 48.0, 0.1875]),)), 1e-5, 1e-6,
                        "vᵀJ", False)
    assert "one item" in fact and "[0]" in hint and "torch.stack" not in hint
    rows = _read(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    fact, hint = relate(rows, _read([torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])]),
                        1e-5, 1e-6, "J", False)
    assert hint == "torch.stack the items"
    fact, hint = relate(rows, _read([torch.tensor([9.0, 2.0]), torch.tensor([3.0, 4.0])]),
                        1e-5, 1e-6, "J", False)
    assert hint is None and "torch.stack" not in fact


def test_a_tuple_is_named_a_tuple_in_what_the_test_cell_says():
    """The page quoted the cell's "should be a torch.Tensor, not tuple" as "not list"."""
    import torch

    from coursekit.checks import tensor_said

    found = _read((torch.tensor([1.0, 2.0]),))
    assert found == [_read(torch.tensor([1.0, 2.0]))]  # compared as the list of its items
    from autograder.trusted.said import _plain
    said, _ = tensor_said("vᵀJ", _plain(found), torch.tensor([1.0, 2.0]))
    assert "not tuple" in said, said
    assert type(_read([1.0])).__name__ == "list"


def test_labels_in_words_are_not_written_as_subscripts():
    from autograder.trusted.outcomes import member
    assert member("after one step", "w") == "after one step: w"
    assert member("requires_grad of each parameter", "encoder.weight") == \
        "requires_grad of each parameter: encoder.weight"
    assert member("grads", "act") == "grads['act']"
