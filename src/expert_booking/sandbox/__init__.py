"""``expert-booking-mcp payment-sandbox``: a payment service to try the server with (SANDBOX).

It plays the merchant's checkout: ``GET /payments/{bookingId}`` answers the server's payment
query (CONTRACT section 4), ``/pay/{bookingId}`` is the human payment page that
``paymentPageUrl`` points to, and ``/mailbox`` lists what happened. It reads bookings read-only
from the server's database and keeps payment states in a ledger file of its own.
"""
