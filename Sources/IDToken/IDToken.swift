// IDToken module (placeholder until its first implementation lands).
import COpenSSL
import CCurl
enum IDTokenPlaceholder {}
