// Store module (placeholder until its first implementation lands).
import CLibPQ
enum StorePlaceholder {}
