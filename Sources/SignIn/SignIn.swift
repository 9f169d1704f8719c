// SignIn module (placeholder until its first implementation lands).
enum SignInPlaceholder {}
