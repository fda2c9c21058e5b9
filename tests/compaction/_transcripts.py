"""Small transcript builders for the compaction tests."""

from __future__ import annotations

from plait.records import (
    AssistantRecord,
    EventRecord,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)


class T:
    """Append records with consecutive seqs."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    @property
    def seq(self) -> int:
        return len(self.records)

    def system(self, text: str = "You are helpful.") -> T:
        self.records.append(SystemRecord(seq=self.seq, content=text, tokens=5))
        return self

    def user(self, text: str, tokens: int = 10) -> T:
        self.records.append(UserRecord(seq=self.seq, content=text, tokens=tokens))
        return self

    def say(self, text: str, tokens: int = 10) -> T:
        self.records.append(AssistantRecord(seq=self.seq, content=text, tokens=tokens))
        return self

    def call(self, *names: str, text: str = "", out: str = "output", ok: bool = True) -> T:
        base = self.seq
        calls = tuple(ToolCall(f"c{base}_{i}", n, {"arg": i}) for i, n in enumerate(names))
        self.records.append(AssistantRecord(seq=base, content=text, tool_calls=calls, tokens=8))
        for c in calls:
            self.records.append(
                ToolRecord(
                    seq=self.seq, content=out, tool_call_id=c.id, tool_name=c.name, ok=ok,
                    tokens=len(out) // 4 + 3,
                )
            )  # fmt: skip
        return self

    def event(self, name: str = "client_attached") -> T:
        self.records.append(EventRecord(seq=self.seq, name=name))
        return self

    def summary(self, text: str, folds_from: int, folds_to: int) -> T:
        self.records.append(
            SummaryRecord(
                seq=self.seq, content=text, folds_from=folds_from, folds_to=folds_to, tokens=20
            )
        )
        return self
