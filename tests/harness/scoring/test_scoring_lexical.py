"""Lexical metrics: reference parity (tRPC benchmark §6) and library-metric sanity."""

from __future__ import annotations

import math

import pytest
import sacrebleu

from harness.scoring import LexicalScorer, ScoreInput, Scorer
from harness.scoring.lexical import (
    EOS_LITERAL,
    bleu1,
    contains_match,
    rouge1,
    rouge2,
    rouge_l,
    rouge_l_lib,
    rouge_n,
    sacrebleu_sentence,
    token_f1,
    tokenize,
)

# Golden values produced by running the reference Go functions (qmsum_metrics.go and
# containsExactMatch at trpc-agent-go-benchmark 1edee87, go1.19 linux/amd64) on these inputs.
# Columns: prediction, reference, f1, rouge1, rouge2, rouge_l, bleu1, em.
GO_GOLDEN = [
    ("The cat sat on the mat.", "the cat", 0.5, 0.5, 0.33333333333333337, 0.5, 0.3333333333333333, True),
    (
        "You mentioned that your sister Sarah lives in Portland, Oregon.",
        "Portland",
        0.18181818181818182,
        0.18181818181818182,
        0.0,
        0.18181818181818182,
        0.1,
        True,
    ),
    ("I don't have that information.", "Business Administration", 0.0, 0.0, 0.0, 0.0, 0.0, False),
    (
        "It took you 45 minutes (each way) to commute.",
        "45 minutes each way",
        0.6153846153846153,
        0.6153846153846153,
        0.5454545454545454,
        0.6153846153846153,
        0.4444444444444444,
        False,
    ),
    ("the the the the", "the cat", 0.3333333333333333, 0.3333333333333333, 0.0, 0.3333333333333333, 0.25, False),
    ("c b a", "a b c", 1.0, 1.0, 0.0, 0.3333333333333333, 1.0, False),
    ("a x b y c", "a b c", 0.7499999999999999, 0.7499999999999999, 0.0, 0.7499999999999999, 0.6, False),
    (
        "Café NAÏVE 東京 ٣ snake_case",
        "cafe naive 東京",
        0.2222222222222222,
        0.2222222222222222,
        0.0,
        0.2222222222222222,
        0.16666666666666666,
        False,
    ),
    ("ΟΔΟΣ İstanbul", "οδοσ istanbul", 1.0, 1.0, 1.0, 1.0, 1.0, True),
    ("answer<｜end▁of▁sentence｜>", "answer", 1.0, 1.0, 0.0, 1.0, 1.0, True),
    ("foo<｜end▁of▁sentence｜>bar", "foo bar", 1.0, 1.0, 1.0, 1.0, 1.0, False),
    ("!!!", "...", 1.0, 1.0, 1.0, 1.0, 1.0, False),
    ("", "x", 0.0, 0.0, 0.0, 0.0, 0.0, False),
    ("x", "", 0.0, 0.0, 0.0, 0.0, 0.0, False),
    ("a", "a", 1.0, 1.0, 0.0, 1.0, 1.0, True),
    ("a", "a b c", 0.5, 0.5, 0.0, 0.5, 0.1353352832366127, False),
    ("a b a b a b", "a b", 0.5, 0.5, 0.33333333333333337, 0.5, 0.3333333333333333, True),
    ("New-York", "new york", 1.0, 1.0, 1.0, 1.0, 1.0, False),
    ("  Yes  ", "yes", 1.0, 1.0, 0.0, 1.0, 1.0, True),
    ("abc", "\x1cabc", 1.0, 1.0, 0.0, 1.0, 1.0, False),
]


@pytest.mark.parametrize("pred,ref,f1,r1,r2,rl,b1,em", GO_GOLDEN)
def test_matches_reference_go_output(pred, ref, f1, r1, r2, rl, b1, em):
    assert token_f1(pred, ref) == f1
    assert rouge1(pred, ref) == r1
    assert rouge2(pred, ref) == r2
    assert rouge_l(pred, ref) == rl
    # exp() may differ from Go's in the last ulp, so BLEU-1 is compared to 1e-15.
    assert bleu1(pred, ref) == pytest.approx(b1, rel=1e-15, abs=1e-15)
    assert contains_match(pred, ref) is em


class TestTokenize:
    def test_punctuation_becomes_separator(self):
        assert tokenize("Hello, World! It's 3.14.") == ["hello", "world", "it", "s", "3", "14"]

    def test_underscore_and_symbols_split(self):
        assert tokenize("snake_case a+b $5 @me") == ["snake", "case", "a", "b", "5", "me"]

    def test_unicode_letters_and_numbers_kept(self):
        # Lt (ǅ), Nl (Ⅻ), No (½), Arabic-Indic digit, CJK are all letters/numbers.
        assert tokenize("Café 東京 ٣ ǅ Ⅻ ½") == ["café", "東京", "٣", "ǆ", "ⅻ", "½"]

    def test_combining_mark_is_not_a_letter(self):
        assert tokenize("cafe\u0301 x") == ["cafe", "x"]

    def test_go_lowercasing(self):
        # Go lowercases rune by rune: no final sigma, and U+0130 maps to plain "i".
        assert tokenize("ΟΔΟΣ İstanbul") == ["οδοσ", "istanbul"]

    def test_end_of_sentence_literal_removed_as_separator(self):
        assert tokenize(f"Paris{EOS_LITERAL}") == ["paris"]
        assert tokenize(f"foo{EOS_LITERAL}bar") == ["foo", "bar"]

    def test_empty_and_whitespace(self):
        assert tokenize("") == []
        assert tokenize(" \t\n\u3000\xa0") == []


class TestF1:
    def test_partial_overlap(self):
        # common = {the, cat} = 2; P = 2/6, R = 2/2
        assert token_f1("the cat sat on the mat", "the cat") == pytest.approx(0.5)

    def test_repeated_tokens_are_clipped(self):
        assert token_f1("the the the", "the") == pytest.approx(0.5)  # P = 1/3, R = 1

    def test_empty_sides(self):
        assert token_f1("", "") == 1.0
        assert token_f1("?!", "...") == 1.0  # both tokenize to nothing
        assert token_f1("", "x") == 0.0
        assert token_f1("x", "") == 0.0

    def test_no_overlap_and_case(self):
        assert token_f1("dog", "cat") == 0.0
        assert token_f1("PARIS", "paris") == 1.0

    def test_rouge1_is_f1(self):
        for p, r in [("a b c", "b c d"), ("x x y", "x"), ("", ""), ("a", "")]:
            assert rouge1(p, r) == token_f1(p, r)


class TestRouge:
    def test_rouge2_known_value(self):
        assert rouge2("a b c", "a b") == pytest.approx(2 / 3)  # bigrams {ab, bc} vs {ab}

    def test_rouge2_clipping(self):
        assert rouge2("a b a b a b", "a b") == pytest.approx(1 / 3)  # 1 match of 5 pred bigrams

    def test_rouge2_short_side(self):
        assert rouge2("a", "a") == 0.0  # fewer than 2 tokens, not both empty
        assert rouge2("", "") == 1.0
        assert rouge2("a b", "a") == 0.0

    def test_rouge_n_rejects_bad_n(self):
        with pytest.raises(ValueError, match="n must be >= 1"):
            rouge_n("a", "a", 0)

    def test_rouge_l_lcs(self):
        assert rouge_l("a x b y c", "a b c") == pytest.approx(0.75)  # LCS 3, P 3/5, R 1
        assert rouge_l("c b a", "a b c") == pytest.approx(1 / 3)  # order matters, unlike ROUGE-1
        assert rouge_l("", "") == 1.0
        assert rouge_l("", "a") == 0.0


class TestBleu1:
    def test_brevity_penalty(self):
        assert bleu1("a", "a b c") == pytest.approx(math.exp(1 - 3))
        assert bleu1("a b", "a b c d") == pytest.approx(math.exp(1 - 2))

    def test_no_penalty_when_longer(self):
        assert bleu1("a b c d", "a b") == pytest.approx(0.5)

    def test_clipped_precision(self):
        assert bleu1("the the the the", "the cat") == pytest.approx(0.25)

    def test_empty_rules(self):
        assert bleu1("", "") == 1.0
        assert bleu1("", "x") == 0.0
        assert bleu1("x", "") == 0.0


class TestContainsMatch:
    def test_containment_not_equality(self):
        assert contains_match("The answer is Paris.", "paris")
        assert contains_match("3 times", "3")
        assert not contains_match("Paris", "The answer is Paris")

    def test_trim_and_case(self):
        assert contains_match("  YES ", " yes\n")

    def test_no_punctuation_normalisation(self):
        assert not contains_match("New-York", "new york")
        assert not contains_match("Paris", "Paris.")

    def test_empty_reference_requires_empty_prediction(self):
        assert contains_match("", "")
        assert contains_match(" ", "\t")
        assert not contains_match("anything", "")

    def test_end_of_sentence_literal_is_not_stripped(self):
        assert not contains_match("Paris", f"Paris{EOS_LITERAL}")

    def test_go_whitespace_rules(self):
        # Go's TrimSpace keeps U+001C (Python's strip would remove it).
        assert not contains_match("abc", "\x1cabc")


class TestLibraryMetrics:
    def test_rouge_l_lib(self):
        assert rouge_l_lib("the cat sat", "the cat sat on") == pytest.approx(6 / 7)
        assert rouge_l_lib("Paris!", "paris") == pytest.approx(1.0)
        assert rouge_l_lib("", "") == 0.0  # rouge-score's own empty rule, unlike the reference

    def test_rouge_l_lib_ascii_tokenizer(self):
        assert rouge_l_lib("東京", "東京") == 0.0  # the default tokenizer drops non-ASCII
        assert rouge_l("東京", "東京") == 1.0

    def test_sacrebleu_sentence_matches_library(self):
        for p, r in [("the cat sat on a mat", "the cat is on the mat"), ("Paris", "It is Paris")]:
            assert sacrebleu_sentence(p, r) == pytest.approx(sacrebleu.sentence_bleu(p, [r]).score / 100)
        assert sacrebleu_sentence("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1.0)
        assert sacrebleu_sentence("", "the cat") == 0.0


class TestLexicalScorer:
    def test_protocol_and_metrics(self):
        scorer = LexicalScorer()
        assert isinstance(scorer, Scorer)
        names = [m.name for m in scorer.metrics]
        assert names == ["f1", "rouge1", "rouge2", "rouge_l", "bleu1", "em", "rouge_l_lib", "sacrebleu_sentence"]
        assert all(m.higher_is_better and m.description for m in scorer.metrics)

    def test_score_values(self):
        item = ScoreInput(
            "q1",
            "single-session-user",
            "Where?",
            "Portland",
            "You mentioned that your sister Sarah lives in Portland, Oregon.",
        )
        res = LexicalScorer().score(item)
        assert set(res.values) == {m.name for m in LexicalScorer.metrics}
        assert res.values["em"] == 1.0
        assert res.values["f1"] == pytest.approx(2 / 11)
        assert res.values["bleu1"] == pytest.approx(0.1)
        assert all(isinstance(v, float) and 0.0 <= v <= 1.0 + 1e-12 for v in res.values.values())
        assert res.details == {"pred_tokens": 10, "ref_tokens": 1}

    def test_miss_gives_em_zero(self):
        res = LexicalScorer().score(ScoreInput("q", "t", "?", "Portland", "Seattle"))
        assert res.values["em"] == 0.0 and res.values["f1"] == 0.0

    def test_non_string_reference_named(self):
        with pytest.raises(TypeError, match="reference of 'q7' must be str"):
            LexicalScorer().score(ScoreInput("q7", "t", "?", 3, "3"))  # type: ignore[arg-type]


def test_hydra_instantiation():
    from hydra.utils import instantiate

    scorer = instantiate({"_target_": "harness.scoring.lexical.LexicalScorer"})
    assert isinstance(scorer, LexicalScorer)
