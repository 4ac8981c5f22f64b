"""Studies: datasets, mechanism runners, evaluation, audits and the attack catalogue.
They sit above mechanisms and the core, below the CLI."""
