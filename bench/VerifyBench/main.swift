print("verify-bench")
