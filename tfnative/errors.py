"""The one exception type that reaches the user as a one-line message."""


class TfnativeError(Exception):
    """A problem the user can act on; the CLI prints ``tfnative: <message>`` and exits."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
