enum NS {
    static let client = "jabber:client"
    static let stream = "http://etherx.jabber.org/streams"
    static let sasl = "urn:ietf:params:xml:ns:xmpp-sasl"
    static let bind = "urn:ietf:params:xml:ns:xmpp-bind"
    static let session = "urn:ietf:params:xml:ns:xmpp-session"
    static let stanzas = "urn:ietf:params:xml:ns:xmpp-stanzas"
    static let streams = "urn:ietf:params:xml:ns:xmpp-streams"
    static let ping = "urn:xmpp:ping"
    static let roster = "jabber:iq:roster"
    static let gcm = "google:mobile:data"
}
