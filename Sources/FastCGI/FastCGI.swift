// FastCGI module (placeholder until its first implementation lands).
import CFastCGI
enum FastCGIPlaceholder {}
