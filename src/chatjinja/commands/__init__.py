"""The CLI's commands, one module each; ``chatjinja.cli`` lists them."""
