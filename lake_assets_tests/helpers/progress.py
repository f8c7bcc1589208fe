"""A progress report that records what the CLI would draw."""


class RecordingProgress:
    def __init__(self) -> None:
        self.steps: list[tuple[str, int | None]] = []
        self.advanced = 0

    def step(self, description: str, total: int | None = None) -> None:
        self.steps.append((description, total))

    def advance(self, count: int = 1) -> None:
        self.advanced += count
