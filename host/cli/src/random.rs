//! Random tokens the CLI makes: a Live API token for a generated bundle, the token of a
//! runtime's recording sessions.

use rand::RngCore;

/// A bearer token: 32 random bytes, hex.
pub fn token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
