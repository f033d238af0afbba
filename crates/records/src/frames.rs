//! Length-prefixed frames, the byte layout of the ingest cache's snapshots and of the panels
//! inside them: a frame is its length as a little-endian u64, then its bytes. [`put`] writes one,
//! [`Cursor`] reads them back (and fixed-length runs between them) and refuses bytes that end
//! early or run past the last read.

use anyhow::{bail, Context as _, Result};

/// Appends `bytes` to `out` as one frame.
pub fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads the next frame from a stream (the first frame of a file without reading the rest);
/// `limit` bounds its length (a broken length is an error, not an allocation).
pub fn read_frame(from: &mut impl std::io::Read, limit: u64) -> Result<Vec<u8>> {
    let mut len = [0u8; 8];
    from.read_exact(&mut len).context("truncated: no frame length")?;
    let len = u64::from_le_bytes(len);
    if len > limit {
        bail!("a frame of {len} bytes, more than the {limit} allowed");
    }
    let mut bytes = vec![0u8; len as usize];
    from.read_exact(&mut bytes).with_context(|| format!("truncated: a frame of {len} bytes ends early"))?;
    Ok(bytes)
}

/// Reads a byte slice front to back.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, at: 0 }
    }

    /// The next `len` bytes.
    pub fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let end =
            self.at.checked_add(len).filter(|&e| e <= self.bytes.len()).with_context(|| {
                format!("truncated: {len} bytes wanted at byte {} of {}", self.at, self.bytes.len())
            })?;
        let b = &self.bytes[self.at..end];
        self.at = end;
        Ok(b)
    }

    /// The next frame's bytes.
    pub fn frame(&mut self) -> Result<&'a [u8]> {
        let len = u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"));
        self.take(usize::try_from(len).context("a frame longer than memory")?)
    }

    /// Ends the reading: every byte was read.
    pub fn finish(self) -> Result<()> {
        if self.at != self.bytes.len() {
            bail!("{} bytes past its end", self.bytes.len() - self.at);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_frame_of_a_stream() {
        let mut out = Vec::new();
        put(&mut out, b"header");
        put(&mut out, b"the rest");
        let mut r = &out[..];
        assert_eq!(read_frame(&mut r, 100).unwrap(), b"header");
        assert_eq!(read_frame(&mut r, 100).unwrap(), b"the rest");
        assert!(read_frame(&mut r, 100).unwrap_err().to_string().contains("no frame length"));
        assert!(read_frame(&mut &out[..], 5).unwrap_err().to_string().contains("more than the 5 allowed"));
        assert!(read_frame(&mut &out[..10], 100).unwrap_err().to_string().contains("ends early"));
    }

    #[test]
    fn frames_round_trip_and_refuse_cut_or_long_bytes() {
        let mut out = Vec::new();
        put(&mut out, b"header");
        out.extend_from_slice(&[1, 2, 3]);
        put(&mut out, b"");
        let mut c = Cursor::new(&out);
        assert_eq!(c.frame().unwrap(), b"header");
        assert_eq!(c.take(3).unwrap(), &[1, 2, 3]);
        assert_eq!(c.frame().unwrap(), b"");
        c.finish().unwrap();

        // cut anywhere: an error naming where
        for cut in 0..out.len() {
            let mut c = Cursor::new(&out[..cut]);
            let e = (|| -> Result<()> {
                c.frame()?;
                c.take(3)?;
                c.frame()?;
                Ok(())
            })()
            .unwrap_err();
            assert!(e.to_string().starts_with("truncated"), "{e}");
        }
        // a byte too many
        let mut long = out.clone();
        long.push(0);
        let mut c = Cursor::new(&long);
        (c.frame(), c.take(3), c.frame()).2.unwrap();
        assert_eq!(c.finish().unwrap_err().to_string(), "1 bytes past its end");
        // a length past the slice
        let mut huge = u64::MAX.to_le_bytes().to_vec();
        huge.push(0);
        assert!(Cursor::new(&huge).frame().is_err());
    }
}
