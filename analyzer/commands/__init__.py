"""One module per ``launchgap`` subcommand (see :mod:`analyzer.cli`)."""
