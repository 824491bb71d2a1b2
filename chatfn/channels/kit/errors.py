"""The five failures a channel raises: it classifies what its platform said, and the kit's
connect loop (channel.py) and the delivery policy (chatfn/runtime/delivery_policy.py) decide
what follows. They live in chatfn.common.messages (the outbox, below the channels, catches
them); a channel imports them from here.

- `CredentialsRefused(text)`: the platform refused the token or secret. The text is the one
  line the operator reads: name the setting to fix. Connecting: down, retried slowly;
  sending: the message waits in the outbox.
- `RateLimited(text, retry_after)`: slow down; `retry_after` seconds as the platform said (None
  when it named none: a backoff). Waited out in place within `max_retry_after`, else in the
  outbox.
- `Unreachable(text)`: network, timeout, 5xx. Connecting: backoff to a cap; sending: the
  message waits in the outbox (backoff, or at once when the channel is back).
- `NotDelivered(text, rest=)`: cannot go out now for another reason (not connected yet); the
  base of the three above. `rest` is what a split message still owes.
- `DeliveryRefused(text)`: refused for good (a chat that does not exist, no permission).
"""

from chatfn.common.messages import (
    CredentialsRefused,
    DeliveryRefused,
    NotDelivered,
    RateLimited,
    Unreachable,
)

__all__ = ["CredentialsRefused", "DeliveryRefused", "NotDelivered", "RateLimited", "Unreachable"]
