"""What a user reads: text and JSON reports, the Markdown bug report, verdicts and merged trees."""
