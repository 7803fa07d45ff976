"""Where one run keeps its files under CRUCIBLE_HOME; the only module that knows the directory layout.

``runs/<id>/arms/<arm>/<component>`` are the controller-owned checkouts (candidate, champion, base);
``runs/<id>/agent/`` holds CANDIDATE.md and the steer file (outside every checkout); ``runs/<id>/logs/``
the captured, redacted output of every command.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ARMS = ("candidate", "champion", "base")


@dataclass(frozen=True)
class RunLayout:
    root: Path
    components: tuple[str, ...]

    @property
    def composite(self) -> bool:
        return len(self.components) > 1

    def arm_dir(self, arm: str) -> Path:
        return self.root / "arms" / arm

    def checkout(self, arm: str, component: str) -> Path:
        return self.arm_dir(arm) / component

    def workspace_root(self, arm: str) -> Path:
        """The agent's and the evaluator's working directory for ``arm`` (docs/agent.md)."""
        if self.composite:
            return self.arm_dir(arm)
        return self.checkout(arm, self.components[0])

    @property
    def agent_dir(self) -> Path:
        return self.root / "agent"

    @property
    def candidate_file(self) -> Path:
        return self.agent_dir / "CANDIDATE.md"

    @property
    def steer_file(self) -> Path:
        return self.agent_dir / "steer.txt"

    @property
    def preset_turn(self) -> Path:
        """A preset's turn folder: the CLI's output files and prepared HOME, made and removed per turn
        (``agents.turn``); writable inside the sandbox, unlike ``agent_dir``."""
        return self.root / "preset-turn"

    @property
    def process_groups(self) -> Path:
        return self.root / "pgroups"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def sandbox_home(self) -> str:
        return "/tmp/crucible-home"

    def log_file(self, turn: int, step: str) -> Path:
        return self.logs / f"turn-{turn:04d}-{step}.log"
