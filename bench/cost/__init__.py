"""The cost model of docs/COST.md, printed by bench/cost_model.py (the modules are listed in its docstring)."""
