"""Rules as named components: one contract, one ordered registry per stage, switchable by name.

A *rule* is a piece of domain logic in the answer path that decides something a reader may
want to check: the answerability gate refusing a question, a retrieval re-ordering, a concise
answer extracted from a table cell. Each rule has

- ``name``: ``<stage>.<rule>`` (``gate.missing_anchors``, ``retrieval.table_vote``,
  ``concise.table_cell``), the name settings, the X-ray and ``query_logs`` use;
- ``why``: one sentence saying what it is for, shown by ``ragaudit rules`` and in the docs;
- ``run``: the stage's function; it returns a ``Fired`` (the rule applied, with its effect and
  a reason an auditor can read) or ``None`` (it did not apply).

A ``Registry`` holds a stage's rules in the order they run. ``Settings.disabled_rules`` switches
rules off by name (``RAGAUDIT_DISABLED_RULES=gate.year_not_reported,retrieval.table_vote``); an
unknown name is refused at start-up with the list of valid ones (``check_names``), so a typo never
leaves a rule on silently. Every rule that fired on a request is listed in the answer's
``rules`` (``/query`` JSON, the X-ray and its ``query_logs`` row): "refused by
gate.period_end_not_reported: the searched documents report no period ended …".

The pattern follows ragas' metric units (a small unit with named inputs returning a value and a
reason; explodinggradients/ragas ``metrics/_context_precision.py``) applied to decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ragaudit.types import Fired

__all__ = ["Fired", "REGISTRIES", "Registry", "Rule", "all_rules", "check_names"]


@dataclass(frozen=True)
class Rule:
    """A named rule of one stage (see the module docstring)."""

    name: str
    why: str
    run: Callable[..., Fired | None]

    @property
    def stage(self) -> str:
        return self.name.split(".", 1)[0]


class Registry:
    """The rules of one stage, in the order they run."""

    def __init__(self, stage: str, rules: Iterable[Rule]):
        self.stage = stage
        self.rules = list(rules)
        for r in self.rules:
            if r.stage != stage:
                raise ValueError(f"rule {r.name!r} is not of stage {stage!r}")
        names = [r.name for r in self.rules]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate rule names in stage {stage!r}: {names}")
        REGISTRIES[stage] = self

    def names(self) -> list[str]:
        return [r.name for r in self.rules]

    def active(self, disabled: Iterable[str] = ()) -> list[Rule]:
        """The rules not switched off, in order."""
        off = set(disabled)
        return [r for r in self.rules if r.name not in off]

    def on(self, name: str, disabled: Iterable[str] = ()) -> bool:
        """Whether rule ``name`` of this stage is switched on (``KeyError`` for an unknown name)."""
        if name not in self.names():
            raise KeyError(f"unknown rule {name!r}; rules of stage {self.stage!r}: {', '.join(self.names())}")
        return name not in set(disabled)


# stage -> its registry; filled as the stage modules are imported (ragaudit.retrieve.retriever,
# ragaudit.answer.answerability, ragaudit.answer.answerers, ragaudit.answer.concise)
REGISTRIES: dict[str, Registry] = {}


def all_rules() -> list[Rule]:
    """Every registered rule, stage by stage in the order the stages run (a stage's rules are
    registered when its module is imported: ``ragaudit.query`` imports them all)."""
    order = ["retrieval", "gate", "answer", "concise"]
    stages = sorted(REGISTRIES, key=lambda s: (order.index(s) if s in order else len(order), s))
    return [r for s in stages for r in REGISTRIES[s].rules]


def check_names(names: Iterable[str]) -> frozenset[str]:
    """``names`` as a frozenset after checking each is a registered rule; ``ValueError`` naming
    the unknown ones and listing the valid ones otherwise."""
    wanted = frozenset(n.strip() for n in names if n and n.strip())
    known = {r.name for r in all_rules()}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(f"unknown rule(s) {', '.join(unknown)}; valid rules: {', '.join(sorted(known))}")
    return wanted
