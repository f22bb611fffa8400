"""The judges' prompt texts (harness/scoring/judges.py), verbatim from the two references."""

from __future__ import annotations

from harness.prompts.provenance import LONGMEMEVAL, TRPC_BENCHMARK, verbatim

# Verbatim from trpc-group/trpc-agent-go-benchmark (fork Flash-LHR/trpc-agent-go-benchmark),
# commit 1edee87bc8b4efa539329e6766fd0fcd4b03fd7b, summary/trpc-agent-go-impl/qmsum_metrics.go,
# const qmsumJudgePrompt (a Go raw string: no trailing newline). Filled with %-formatting
# (query, reference, prediction) exactly like fmt.Sprintf("%s").
TRPC_JUDGE_PROMPT = """You are an expert evaluator for query-based meeting summarization.

Query: %s
Reference Answer: %s
Predicted Answer: %s

Judge whether the predicted answer is faithful and semantically equivalent to the reference answer for the given query.
Respond with a JSON object:
{"correct": true/false, "confidence": 0.0-1.0, "reason": "brief explanation"}"""

# Prompt texts verbatim from xiaowu0162/LongMemEval, commit b11ff723381cf41e744c5524be0c52b3a408516c,
# src/evaluation/evaluate_qa.py, `get_anscheck_prompt` (the spec cites 9e0b455; the texts are the ones quoted
# in trpc-longmemeval-benchmark.md §8). Filled positionally with str.format(question, answer, response).
_LME_BASE = (
    "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response "
    "contains the correct answer. Otherwise, answer no. If the response is equivalent to the correct answer or "
    "contains all the intermediate steps to get the correct answer, you should also answer yes. If the response only "
    "contains a subset of the information required by the answer, answer no."
)
_LME_TAIL = "\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only."
LME_JUDGE_PROMPTS: dict[str, str] = {
    "single-session-user": _LME_BASE + " " + _LME_TAIL,
    "single-session-assistant": _LME_BASE + " " + _LME_TAIL,
    "multi-session": _LME_BASE + " " + _LME_TAIL,
    "temporal-reasoning": _LME_BASE + " In addition, do not penalize off-by-one errors for the number of days. If the "
    "question asks for the number of days/weeks/months, etc., and the model makes off-by-one errors (e.g., predicting "
    "19 days when the answer is 18), the model's response is still correct. " + _LME_TAIL,
    "knowledge-update": "I will give you a question, a correct answer, and a response from a model. Please answer yes "
    "if the response contains the correct answer. Otherwise, answer no. If the response contains some previous "
    "information along with an updated answer, the response should be considered as correct as long as the updated "
    "answer is the required answer." + _LME_TAIL,
    "single-session-preference": "I will give you a question, a rubric for desired personalized response, and a "
    "response from a model. Please answer yes if the response satisfies the desired response. Otherwise, answer no. "
    "The model does not need to reflect all the points in the rubric. The response is correct as long as it recalls "
    "and utilizes the user's personal information correctly.\n\nQuestion: {}\n\nRubric: {}\n\nModel Response: {}\n\n"
    "Is the model response correct? Answer yes or no only.",
}
LME_ABSTENTION_PROMPT = (
    "I will give you an unanswerable question, an explanation, and a response from a model. Please answer yes if the "
    "model correctly identifies the question as unanswerable. The model could say that the information is incomplete, "
    "or some other information is given but the asked information is not.\n\nQuestion: {}\n\nExplanation: {}\n\n"
    "Model Response: {}\n\nDoes the model correctly identify the question as unanswerable? Answer yes or no only."
)

SOURCES = {
    "TRPC_JUDGE_PROMPT": verbatim(TRPC_BENCHMARK, "summary/trpc-agent-go-impl/qmsum_metrics.go", "qmsumJudgePrompt"),
    "LME_JUDGE_PROMPTS": verbatim(LONGMEMEVAL, "src/evaluation/evaluate_qa.py", "get_anscheck_prompt"),
    "LME_ABSTENTION_PROMPT": verbatim(LONGMEMEVAL, "src/evaluation/evaluate_qa.py", "get_anscheck_prompt"),
}
