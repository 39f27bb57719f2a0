"""Tests of chatjinja.syntax: jinja2 parity, mutants, goldens and the AST contract."""
