// tokensignin command line (placeholder).
print("tokensignin")
