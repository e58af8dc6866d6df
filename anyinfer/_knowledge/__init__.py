"""Knowledge about models: capabilities, the alias catalog, pricing and context budgets."""
