"""One module per ``launchgap`` subcommand (see :mod:`launchgap.cli`)."""
