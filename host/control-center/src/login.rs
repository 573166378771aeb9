//! Who may look: one admin password (from an environment variable or a Secret), checked
//! at a login form that sets a session cookie (random, HttpOnly, SameSite=Strict, 12 hours),
//! or no login at all, which only a loopback address may serve.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use parking_lot::Mutex;
use rand::RngCore;

use crate::csrf::{cookie, same};

/// How long a session lasts.
const SESSION: Duration = Duration::from_secs(12 * 3600);
/// The session cookie.
pub const COOKIE: &str = "ork_cc_session";
/// The one user name.
pub const USER: &str = "admin";

/// The login policy and the live sessions.
#[derive(Debug)]
pub struct Login {
    password: Option<String>,
    sessions: Mutex<HashMap<String, Instant>>,
}

impl Login {
    /// Sign-in with `password`.
    pub fn password(password: String) -> Self {
        Self {
            password: Some(password),
            sessions: Mutex::default(),
        }
    }

    /// No sign-in.
    pub fn none() -> Self {
        Self {
            password: None,
            sessions: Mutex::default(),
        }
    }

    pub fn required(&self) -> bool {
        self.password.is_some()
    }

    /// A new session when `user` and `password` are right.
    pub fn sign_in(&self, user: &str, password: &str) -> Option<String> {
        let expected = self.password.as_deref()?;
        let right = user == USER && same(password.as_bytes(), expected.as_bytes());
        if !right {
            return None;
        }
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut sessions = self.sessions.lock();
        let now = Instant::now();
        sessions.retain(|_, started| now.duration_since(*started) < SESSION);
        sessions.insert(token.clone(), now);
        Some(token)
    }

    pub fn sign_out(&self, token: &str) {
        self.sessions.lock().remove(token);
    }

    /// Whether a request with these headers may look.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        if !self.required() {
            return true;
        }
        let Some(token) = session_of(headers) else { return false };
        let sessions = self.sessions.lock();
        sessions.get(token).is_some_and(|started| started.elapsed() < SESSION)
    }
}

/// The session token in a request's cookies.
pub fn session_of(headers: &HeaderMap) -> Option<&str> {
    cookie(headers, COOKIE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_needs_the_password_and_ends_at_sign_out() {
        let login = Login::password("hunter2".into());
        assert!(login.sign_in(USER, "hunter3").is_none());
        assert!(login.sign_in("root", "hunter2").is_none());
        let token = login.sign_in(USER, "hunter2").unwrap();
        assert_eq!(token.len(), 64);
        let with = |cookie: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(axum::http::header::COOKIE, cookie.parse().unwrap());
            headers
        };
        let cookie = with(&format!("other=1; {COOKIE}={token}"));
        assert!(login.admits(&cookie));
        assert!(!login.admits(&with("ork_cc_session=forged")));
        assert!(!login.admits(&HeaderMap::new()));
        login.sign_out(&token);
        assert!(!login.admits(&cookie));
        assert!(Login::none().admits(&HeaderMap::new()));
    }
}
