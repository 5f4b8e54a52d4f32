"""Analysis: from a capture to the event users read, and the verdicts on it (between capture and rendering)."""
