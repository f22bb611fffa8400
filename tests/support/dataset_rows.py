"""A LongMemEval dataset row (one question with its haystack) for tests that write their own dataset."""

from __future__ import annotations


def make_row(qid="q1", answer="Paris", question="Where did I go?", sessions=None, qtype="single-session-user"):
    sessions = sessions or [
        [
            {"role": "user", "content": "I went to Paris last May.", "has_answer": True},
            {"role": "assistant", "content": "Nice trip!"},
        ]
    ]
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "answer": answer,
        "question_date": "2023/05/30",
        "haystack_session_ids": [f"s{i}" for i in range(len(sessions))],
        "haystack_dates": ["2023/05/01"] * len(sessions),
        "haystack_sessions": sessions,
        "answer_session_ids": ["s0"],
    }
