"""plait under the agent frameworks people already run.

Each module adapts one framework's session or store interface to plait and
imports that framework only when the module itself is imported (its extra
names the install command). Nothing in plait imports this package.
"""
