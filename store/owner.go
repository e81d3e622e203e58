package store

// Owner is the opaque id the event loop gives each connection. The store only
// keeps it with the connection's ledgers so it can name the holder (in logs,
// and later in wake-ups for other connections).
type Owner uint64
