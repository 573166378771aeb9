//! Answers read within a size limit while they stream in: a registry's "manifest", a
//! runtime's `/katalog` or an external call can be any size, and nothing of it is kept past
//! the limit (a declared length over it is refused before a byte is read).

/// Why an answer was not read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the answer is larger than the {limit} bytes read at most")]
    TooLarge { limit: usize },
    #[error("reading the answer failed: {0}")]
    Transport(#[source] reqwest::Error),
}

/// The body of `response`, up to `limit` bytes.
pub async fn bounded(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, Error> {
    if response.content_length().is_some_and(|length| length > limit as u64) {
        return Err(Error::TooLarge { limit });
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Error::Transport)? {
        if bytes.len() + chunk.len() > limit {
            return Err(Error::TooLarge { limit });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A server that answers every connection with `head` and then `body_bytes` bytes.
    async fn answering(head: String, body_bytes: usize) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let head = head.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 1024];
                    let _ = socket.read(&mut request).await;
                    let _ = socket.write_all(head.as_bytes()).await;
                    let chunk = vec![b'x'; 64 << 10];
                    let mut left = body_bytes;
                    while left > 0 {
                        let n = left.min(chunk.len());
                        if socket.write_all(&chunk[..n]).await.is_err() {
                            return;
                        }
                        left -= n;
                    }
                });
            }
        });
        url
    }

    #[tokio::test]
    async fn an_answer_past_the_limit_is_dropped_as_it_streams() {
        // No length given: read until the limit, then stop.
        let endless = answering("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".into(), 64 << 20).await;
        let response = reqwest::get(&endless).await.unwrap();
        let error = bounded(response, 1 << 20).await.unwrap_err();
        assert!(
            matches!(error, Error::TooLarge { limit } if limit == 1 << 20),
            "{error}"
        );
        // A declared length past the limit: refused before reading.
        let declared = answering(format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", 2u64 << 30), 0).await;
        let response = reqwest::get(&declared).await.unwrap();
        assert!(matches!(bounded(response, 1 << 20).await, Err(Error::TooLarge { .. })));
        let small = answering("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n".into(), 10).await;
        let response = reqwest::get(&small).await.unwrap();
        assert_eq!(bounded(response, 1 << 20).await.unwrap(), b"xxxxxxxxxx");
    }
}
